#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Replay fidelity check (issues 4, 9): does `gpumemprof replay` reproduce PyTorch's own peaks?

For each workload of fidelity_workloads.py and each allocator setting ("" = PyTorch's defaults,
max_split_size_mb:64, roundup_power2_divisions:4, expandable_segments:True), a FRESH worker process (PYTORCH_CUDA_ALLOC_CONF is
read once, at startup) records the caching allocator's history from before its first allocation,
runs the workload, reads torch.cuda.memory_stats() and dumps the snapshot. This process then converts
the snapshot (scripts/torch_snapshot_to_trace.py), replays it with the same settings
(`gpumemprof replay TRACE --conf SETTINGS --json`) and compares the replayed reserved_bytes.all.peak
and allocated_bytes.all.peak with PyTorch's. A difference over 0.5% is a FAIL.

A run whose premises do not hold is INVALID rather than compared blindly: the history ring buffer
overflowed, the trace's alloc/segment counts disagree with PyTorch's counters, PyTorch did not apply
the requested settings, expandable segments were on without being asked for, CUDA-graph pools / an
OOM were involved (things the replay cannot reproduce). Legitimate differences that the replay does model (several streams,
record_stream-deferred frees) are listed as notes.

usage (GPU machine, torch installed):
  python3 scripts/gpu/replay_fidelity.py --gpumemprof PATH/TO/gpumemprof --out fidelity.json
      [--workloads training,inference_varlen,growing_cache] [--confs ";max_split_size_mb:64"]
      [--scale 1.0] [--workdir DIR] [--max-entries 10000000] [--force-no-expandable]
without torch or GPU (tests the convert + replay + compare path on synthetic snapshots):
  python3 scripts/gpu/replay_fidelity.py --selftest --gpumemprof build/src/tools/gpumemprof --out st.json

exit status: 0 all PASS (selftest: every expectation met), 1 otherwise, 2 bad arguments.

This file is the command line; the worker, a run, the judging, the output and the selftest are
in scripts/gpu/fidelity/.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from fidelity.case import run_case
from fidelity.common import CONFS, DEFAULT_MAX_ENTRIES, HERE, TOLERANCE
from fidelity.output import markdown_table, print_table
from fidelity.selftest import selftest
from fidelity.worker import worker_main


def find_gpumemprof(given):
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    return shutil.which("gpumemprof")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--gpumemprof", help="the gpumemprof CLI binary (default: on PATH)")
    ap.add_argument("--out", default="replay-fidelity.json", help="JSON file for all results")
    ap.add_argument("--workloads", default="training,inference_varlen,growing_cache",
                    help="comma-separated subset of fidelity_workloads.WORKLOADS")
    ap.add_argument("--confs", default=None,
                    help="';'-separated allocator settings to check (default: '', max_split_size_mb:64, "
                         "roundup_power2_divisions:4)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every workload's step count")
    ap.add_argument("--workdir", help="where snapshots and traces go (default: a new temporary directory)")
    ap.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES, help="history ring buffer size")
    ap.add_argument("--timeout", type=int, default=300, help="seconds allowed per worker process")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the workers (needs torch)")
    ap.add_argument("--force-no-expandable", action="store_true",
                    help="append expandable_segments:False to the settings (should PyTorch default to them)")
    ap.add_argument("--selftest", action="store_true",
                    help="no torch: synthetic snapshots through the same convert/replay/compare path")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--conf", default="", help=argparse.SUPPRESS)
    ap.add_argument("--env-conf", default="", help=argparse.SUPPRESS)
    ap.add_argument("--outdir", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--selftest-scenario", choices=["basic", "random", "expandable"], help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def run_workloads(args, workdir):
    """Every workload under every setting, each in a worker of its own; None on an unknown workload."""
    sys.path.insert(0, HERE)
    import fidelity_workloads as fw
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in fw.WORKLOADS]
    if unknown:
        print("replay_fidelity: unknown workload(s) %s (known: %s)" % (unknown, sorted(fw.WORKLOADS)),
              file=sys.stderr)
        return None
    confs = CONFS if args.confs is None else args.confs.split(";")
    print("gpumemprof: %s\nworkdir:    %s" % (args.gpumemprof, workdir), flush=True)
    jobs = [(w, c) for w in workloads for c in confs]
    runs = []
    for i, (w, c) in enumerate(jobs, 1):
        steps = max(1, int(round(fw.DEFAULT_STEPS[w] * args.scale)))
        runs.append(run_case(args, w, c, steps, workdir, i, len(jobs)))
    return runs


def write_results(args, workdir, runs, checks, wall):
    """The table, the selftest's expectations, the JSON file (--out), the summary and the Markdown."""
    print_table(runs)
    env = next((r["worker"].get("environment") for r in runs if (r.get("worker") or {}).get("environment")), {})
    summary = {"runs": len(runs), "pass": sum(r["status"] == "PASS" for r in runs),
               "fail": sum(r["status"] == "FAIL" for r in runs),
               "invalid": sum(r["status"] == "INVALID" for r in runs),
               "error": sum(r["status"] == "ERROR" for r in runs), "wall_s": round(wall, 1)}
    if args.selftest:
        print("\nselftest expectations:")
        for name, ok, detail in checks:
            print("  %s  %s%s" % ("ok  " if ok else "FAIL", name, ("  (%s)" % detail) if detail else ""))
        summary["selftest_checks"] = [{"check": n, "ok": ok, "detail": d} for n, ok, d in checks]
    doc = {"tool": "scripts/gpu/replay_fidelity.py", "selftest": args.selftest, "tolerance": TOLERANCE,
           "gpumemprof": args.gpumemprof, "workdir": workdir, "environment": env, "summary": summary, "runs": runs}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True, default=str)
    print("\n%d runs: %d PASS, %d FAIL, %d INVALID, %d ERROR in %.1f s; results in %s"
          % (summary["runs"], summary["pass"], summary["fail"], summary["invalid"], summary["error"], wall, args.out))
    if env:
        print("environment: %s" % ", ".join("%s %s" % (k, v) for k, v in sorted(env.items())))
    print("\nMarkdown (README):\n")
    print(markdown_table(runs))


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)

    args.gpumemprof = find_gpumemprof(args.gpumemprof)
    if not args.gpumemprof:
        print("replay_fidelity: gpumemprof CLI not found (give --gpumemprof PATH)", file=sys.stderr)
        return 2
    args.gpumemprof = os.path.abspath(args.gpumemprof)
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="gpumemprof-fidelity-"))
    os.makedirs(workdir, exist_ok=True)
    t_start = time.perf_counter()

    if args.selftest:
        runs, checks = selftest(args, workdir)
        failed = [c for c in checks if not c[1]]
    else:
        runs = run_workloads(args, workdir)
        if runs is None:
            return 2
        checks = []
        failed = [r for r in runs if r["status"] != "PASS"]
    write_results(args, workdir, runs, checks, time.perf_counter() - t_start)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
