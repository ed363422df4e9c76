#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Cases of process_prog (docs/guarantees.md, Processes): exec() without fork keeps both programs'
# reports and traces, a relative output prefix is taken from the directory the process started
# in, and the exit report of a program whose threads still allocate describes one moment.
# Shares run_hostile.py's runner and checks.
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_hostile import MIB, Checks, env_for, reports, run  # noqa: E402


def replay_allocations(args, tmp, trace):
    """allocation.all.allocated of `gpumemprof replay TRACE`, or an error text."""
    p = subprocess.run([args.cli, "replay", trace, "--json"], capture_output=True, text=True, timeout=120,
                       env=env_for(args, tmp, preload=False))
    try:
        return json.loads(p.stdout)["devices"][0]["memory_stats"]["allocation.all.allocated"]
    except (ValueError, KeyError, IndexError):
        return "replay failed (%d): %s" % (p.returncode, p.stderr[-300:])


def stat(rep, key):
    return sum(d.get("memory_stats", {}).get(key, 0) for d in rep.get("devices", []))


def exec_case(args, tmp, mode):
    c = Checks(mode)
    trace = os.path.join(tmp, "run.gmt")  # no %p: both programs would name the same file
    plain = run(args, tmp, [mode, "1"], preload=False)
    r = run(args, tmp, [mode, "1"], extra={"GPUMEMPROF_TRACE": trace})
    for x, label in ((plain, "plain"), (r, "preload")):
        c.eq("%s: exit code" % label, x.rc, 0)
        c.eq("%s: the second program has the first one's pid" % label, x.val("image2_pid"), x.val("image1_pid"))
    if mode == "exec_fail_first":
        c.eq("failed exec: same answer as without the preload", (r.val("failed_exec"), r.val("failed_exec_enoent")),
             (plain.val("failed_exec"), plain.val("failed_exec_enoent")))
    pid = r.val("image1_pid")
    first = reports(tmp, "out-%s.json" % pid)
    second = reports(tmp, "out-%s.exec1.json" % pid)
    c.eq("the first program's report (out-<pid>.json)", len(first), 1)
    c.eq("the second program's report beside it (out-<pid>.exec1.json)", len(second), 1)
    later = 2 if mode == "exec_fail_first" else 0
    if first:
        # 5 x 10 MiB, and after the failed exec 2 x 4 MiB more while those are live
        c.eq("first program: peak allocated", stat(first[0], "allocated_bytes.all.peak"), (50 + 4 * later) * MIB)
        c.eq("first program: allocations", stat(first[0], "allocation.all.allocated"), 5 + later)
        c.eq("first program: live at the exec", stat(first[0], "allocation.all.current"), 5)
    if second:
        c.eq("second program: peak allocated (1 MiB)", stat(second[0], "allocated_bytes.all.peak"), MIB)
        c.eq("second program: allocations", stat(second[0], "allocation.all.allocated"), 1)
    # The first program's trace closed at the (first) exec; the second's beside it.
    c.eq("first program's trace replays (closed at the exec)", replay_allocations(args, tmp, trace), 5)
    c.eq("second program's trace replays", replay_allocations(args, tmp, trace + ".exec1"), 1)
    c.true("a warning names the second program's files", "out-%s.exec1" % pid in r.err, r.err[-600:])
    if mode == "exec_fail_first":
        c.true("a warning says the trace was closed for the failed exec", "exec that failed" in r.err, r.err[-600:])
    return c.finish(r.out + r.err[-3000:])


def case_exec_self(args, tmp):
    return exec_case(args, tmp, "exec_self")


def case_exec_fail_first(args, tmp):
    return exec_case(args, tmp, "exec_fail_first")


def case_chdir_output(args, tmp):
    """A relative prefix (and the default one) and a relative trace path are taken from the
    directory the process was in when it first used CUDA, not from where it is at exit (which is
    gone). The directory's name holds '%p': it is a name, not a pattern."""
    c = Checks("chdir_output")
    start = os.path.join(tmp, "start %p dir")
    for label, output in (("relative prefix", "rel-%p"), ("default prefix", None)):
        os.makedirs(start, exist_ok=True)
        extra = {"GPUMEMPROF_TRACE": "t-%p.gmt"}
        if output:
            extra["GPUMEMPROF_OUTPUT"] = output
        env = env_for(args, tmp, extra=extra)
        if not output:
            env.pop("GPUMEMPROF_OUTPUT")
        p = subprocess.run([args.prog, "chdir_away"], env=env, cwd=start, capture_output=True, text=True, timeout=60)
        c.eq("%s: exit code" % label, p.returncode, 0)
        stem = "rel-" if output else "gpumemprof-"
        found = glob.glob(os.path.join(glob.escape(start), stem + "*.json"))
        c.eq("%s: the report is in the starting directory" % label, len(found), 1)
        if found:
            with open(found[0], encoding="utf-8") as f:
                rep = json.load(f)
            c.eq("%s: allocations in it" % label, stat(rep, "allocation.all.allocated"), 2)
            c.true("%s: named after its pid" % label, found[0].endswith("%s%d.json" % (stem, rep.get("pid", -1))))
        traces = glob.glob(os.path.join(glob.escape(start), "t-*.gmt"))
        c.eq("%s: the trace is in the starting directory" % label, len(traces), 1)
        c.true("%s: no warning" % label, "warning" not in p.stderr.lower(), p.stderr[-500:])
        shutil.rmtree(start)
    return c.finish()


def case_exit_while_allocating(args, tmp):
    """8 threads free and allocate without pause while main calls exit(): every figure of the
    exit report describes the same moment (the pools' live blocks are the call sites' leaks)."""
    c = Checks("exit_while_allocating")
    for i in range(3):
        d = os.path.join(tmp, "run%d" % i)
        os.makedirs(d)
        r = run(args, d, ["exit_while_allocating"], extra={"GPUMEMPROF_OUTPUT": os.path.join(d, "out-%p")})
        c.eq("run %d: exit code" % i, r.rc, 0)
        reps = reports(d)
        c.eq("run %d: one report" % i, len(reps), 1)
        if not reps:
            continue
        rep = reps[0]
        leaks = rep.get("leaks") or {}
        c.eq("run %d: blocks live in the pools = leaks at exit" % i, stat(rep, "allocation.all.current"),
             leaks.get("count"))
        c.eq("run %d: bytes live in the pools = leaks at exit" % i, stat(rep, "allocated_bytes.all.current"),
             leaks.get("bytes"))
        txt = open(glob.glob(os.path.join(d, "out-*.txt"))[0]).read()
        at_exit = re.search(r"live at exit: .* in (\d+) blocks", txt)
        now = re.findall(r"live now (\d+)\)", txt)
        c.eq("run %d: .txt live at exit = live now" % i, at_exit and int(at_exit.group(1)),
             sum(int(n) for n in now))
    return c.finish()


CASES = {
    "exec_self": case_exec_self,
    "exec_fail_first": case_exec_fail_first,
    "chdir_output": case_chdir_output,
    "exit_while_allocating": case_exit_while_allocating,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--asan-runtime", default="")
    args = ap.parse_args()
    args.prog = os.path.abspath(args.prog)
    tmp = tempfile.mkdtemp(prefix="gpumemprof-process-")
    try:
        return CASES[args.case](args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
