#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Instructions per cuMemAlloc_v2+cuMemFree_v2 pair on a pool hit, counted by callgrind in
# bench_preload's child (181,000 pairs inside measure()): deterministic where wall-clock ns on a
# loaded machine are not. Configurations: the pool alone, the defaults without stacks (the memory
# history for the HTML report and the pickle on), and the full defaults (64-frame stacks, the
# model, the history). With --base LIB (a libgpumemprof.so built from an earlier commit) the same
# child runs with that library too (same bench binary, same simulated driver) and the ratios are
# printed: the hot path must not get slower than the base (goal: every row <= 1.02x, the base's
# own run-to-run spread; c6bf978 defers every free to a fence, so its count depends on when the
# simulated device passes the fences: run it several times, --runs, and read the min-max too).
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness"))
from preload_env import preload_env  # noqa: E402

PAIRS = 181000  # bench_preload's child: 1,000 warm-up + 9 x 20,000 pairs
GOAL = 1.02
CONFIGS = [
    ("pool alone (stacks, history off)", {"GPUMEMPROF_STACK_DEPTH": "0", "GPUMEMPROF_HTML": "0", "GPUMEMPROF_PICKLE": "0"}),
    ("defaults without stacks (history on)", {"GPUMEMPROF_STACK_DEPTH": "0"}),
    ("defaults (64-frame stacks, model, history)", {}),
]


def count(args, lib, extra, tmp):
    env = preload_env(args.sim_dir, lib, output="none", extra=dict({"BENCH_CHILD": "1"}, **extra))
    out = os.path.join(tmp, "cg.out")
    r = subprocess.run([args.valgrind, "--tool=callgrind", "--callgrind-out-file=" + out, "--toggle-collect=*measure*",
                        args.bench], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("callgrind run failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    with open(out) as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(1)) / PAIRS
    sys.exit("no totals in " + out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="bench_preload")
    ap.add_argument("--lib", required=True, help="libgpumemprof.so to measure")
    ap.add_argument("--sim-dir", required=True, help="folder of the simulated libcuda.so.1")
    ap.add_argument("--base", help="libgpumemprof.so of the baseline commit (optional)")
    ap.add_argument("--valgrind", default=shutil.which("valgrind"))
    ap.add_argument("--runs", type=int, default=1, help="runs per figure, the median is printed (the pool's fence "
                    "timing makes counts vary by a few percent)")
    args = ap.parse_args()
    if not args.valgrind:
        print("SKIP: valgrind not found")
        return 77
    libs = [("this build", args.lib)] + ([("base", args.base)] if args.base else [])
    rows, spread = [], []
    with tempfile.TemporaryDirectory(prefix="gpumemprof_pair_instr_") as tmp:
        for name, extra in CONFIGS:
            runs = [[count(args, lib, extra, tmp) for _ in range(max(1, args.runs))] for _, lib in libs]
            rows.append((name, [statistics.median(r) for r in runs]))
            spread.append([(min(r), max(r)) for r in runs])
    print("instructions per cuMemAlloc_v2+cuMemFree_v2 pair, pool hit, simulated device (callgrind, %d pairs, "
          "median of %d, min-max)" % (PAIRS, max(1, args.runs)))
    print("  %-44s %24s" % ("", "this build") + ("%24s %8s" % ("base", "ratio") if args.base else ""))
    for (name, v), sp in zip(rows, spread):
        line = "  %-44s %8.1f (%6.0f-%6.0f)" % (name, v[0], sp[0][0], sp[0][1])
        if args.base:
            line += "%8.1f (%6.0f-%6.0f) %7.2fx" % (v[1], sp[1][0], sp[1][1], v[0] / v[1])
        print(line)
    pool = rows[0][1][0]
    print("  on top of the pool alone: history %.1f, stacks+model %.1f instructions per pair"
          % (rows[1][1][0] - pool, rows[2][1][0] - rows[1][1][0]))
    if args.base:
        ok = True
        for name, v in rows:
            ratio = v[0] / v[1]
            ok = ok and ratio <= GOAL
            print("%s: %s %.2fx the base's instructions per pair (goal <= %.2fx)"
                  % ("PASS" if ratio <= GOAL else "FAIL", name, ratio, GOAL))
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
