#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# What the exit costs at many unique call sites: bench/exit_stacks.cpp makes 2^depth allocations
# from as many distinct stacks (default 2^20, 1,048,576) on the simulated device and returns.
# Measured in the same run: the program without the preload (its own resident set), with the
# preload and every report (the defaults), and with GPUMEMPROF_OUTPUT=none and a trace. For each:
# the resident set just before main returns (in-run), the peak resident set of the whole process
# (ru_maxrss: the exit's peak when the exit is the costliest moment), the exit's wall time and
# the files' sizes. Goal: the peak at most 1.5x the in-run resident set.
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness"))
from preload_env import preload_env  # noqa: E402

GOAL = 1.5


def run(args, tmp, label, preload, extra):
    d = os.path.join(tmp, label)
    os.mkdir(d)
    env = preload_env(args.sim_dir, args.lib if preload else None, output=os.path.join(d, "out"),
                      extra=dict({"SIMCUDA_CAPACITY": "64G"}, **extra))
    if "GPUMEMPROF_TRACE" in extra:
        env["GPUMEMPROF_TRACE"] = os.path.join(d, extra["GPUMEMPROF_TRACE"])
    with open(os.path.join(tmp, label + ".out"), "w+") as out_f, open(os.path.join(tmp, label + ".err"), "w+") as err_f:
        start = time.monotonic()
        p = subprocess.Popen([args.prog, str(args.depth)], env=env, stdout=out_f, stderr=err_f)
        # wait4 ourselves: its rusage holds the child's peak resident set (ru_maxrss).
        _, status, usage = os.wait4(p.pid, 0)
        end = time.monotonic()
        p.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    if p.returncode != 0 or "exit_start" not in values:
        sys.exit("%s: exit %s\n%s\n%s" % (label, p.returncode, out[-2000:], err[-2000:]))
    files = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    return {
        "label": label,
        "rss_run": int(values["rss_kib"]) * 1024,
        "peak": usage.ru_maxrss * 1024,
        "run_s": float(values["exit_start"]) - start,
        "exit_s": end - float(values["exit_start"]),
        "files": files,
        "warnings": [l for l in err.splitlines() if "warning" in l][:5],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--depth", type=int, default=20, help="2^depth unique stacks (default 20: 1,048,576)")
    ap.add_argument("--only", choices=["reports", "trace"], help="run one of the two profiled cases")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpumemprof_exit_cost_") as tmp:
        plain = run(args, tmp, "plain", False, {})
        cases = []
        if args.only in (None, "reports"):
            cases.append(run(args, tmp, "reports", True, {}))
        if args.only in (None, "trace"):
            cases.append(run(args, tmp, "trace", True, {"GPUMEMPROF_OUTPUT": "none",
                                                                "GPUMEMPROF_TRACE": "run.gmt"}))
    mib = 1 << 20
    print("%d unique stacks; without the preload: resident %.0f MiB, run %.1f s" %
          (1 << args.depth, plain["rss_run"] / mib, plain["run_s"]))
    failed = 0
    for c in cases:
        ratio = c["peak"] / c["rss_run"]
        ok = ratio <= GOAL
        failed += not ok
        print("%s: in-run resident %.0f MiB (profiler +%.0f MiB), peak %.0f MiB = %.2fx in-run (goal <= %.1fx: %s); "
              "run %.1f s, exit %.1f s" %
              (c["label"], c["rss_run"] / mib, (c["rss_run"] - plain["rss_run"]) / mib, c["peak"] / mib, ratio, GOAL,
               "met" if ok else "NOT met", c["run_s"], c["exit_s"]))
        print("  files: " + ", ".join("%s %.1f MiB" % (f, n / mib) for f, n in c["files"].items()))
        for w in c["warnings"]:
            print("  " + w)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
