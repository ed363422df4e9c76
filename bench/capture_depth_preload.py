#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Benchmark: what stack capture adds to an allocation as the Python stack gets deeper, measured as
# a program sees it: cudaMalloc+cudaFree pairs through ctypes under LD_PRELOAD=libgpumemprof.so
# (simulated device), in alternating blocks with capture on (depth 64) and off
# (gpumemprof_set_stack_depth(0)) in one process; the cost of capture is the difference of the
# medians. The same stack repeated (a training loop), from 2 Python frames and from 60 (distinct
# functions), alternating too. Goal: the 60-frame cost at most 1.5x the 2-frame one.
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROG = r'''
import ctypes, statistics, sys, time
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
prof = ctypes.CDLL(None)
set_depth = prof.gpumemprof_set_stack_depth
ROUNDS, PAIRS = int(sys.argv[1]), int(sys.argv[2])
p = ctypes.c_void_p()
ref = ctypes.byref(p)
malloc, free = cudart.cudaMalloc, cudart.cudaFree
perf = time.perf_counter_ns

def block():
    t0 = perf()
    for _ in range(PAIRS):
        malloc(ref, 512)
        free(p)
    return (perf() - t0) / PAIRS

def measure():
    """Alternating blocks, capture on and off: median ns per pair of each."""
    on, off = [], []
    for r in range(ROUNDS):
        for depth in ((64, 0) if r % 2 == 0 else (0, 64)):
            set_depth(depth)
            (on if depth else off).append(block())
    set_depth(64)
    return statistics.median(on), statistics.median(off)

src = "".join("def d%d(k):\n    return d%d(k)\n" % (i, i + 1) for i in range(57)) + "def d57(k):\n    return k()\n"
ns = {}
exec(compile(src, "<chain>", "exec"), ns)
deep = ns["d0"]
measure(); deep(measure)  # warm: rules, code objects, pool
rows = []
for _ in range(5):
    s_on, s_off = measure()          # 2 Python frames: <module>, measure
    d_on, d_off = deep(measure)      # 2 + 58 = 60 Python frames
    rows.append((s_on - s_off, d_on - d_off, s_off, d_off))
print("RESULT %r" % rows)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_")}
        env.update(LD_PRELOAD=os.path.abspath(a.lib), LD_LIBRARY_PATH=os.path.abspath(a.sim_dir),
                   GPUMEMPROF_OUTPUT=os.path.join(tmp, "r"), GPUMEMPROF_HTML="0", GPUMEMPROF_PICKLE="0")
        p = subprocess.run([a.python, "-c", PROG, str(a.rounds), str(a.pairs)], env=env, capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            sys.exit("program failed: %s" % p.stderr[-3000:])
        rows = eval(p.stdout.split("RESULT", 1)[1].strip())
        txt = open(os.path.join(tmp, "r.txt")).read()
    med = statistics.median
    shallow, deep = med(r[0] for r in rows), med(r[1] for r in rows)
    ratios = [r[1] / r[0] for r in rows if r[0] > 0]
    print("interpreter: %s" % a.python)
    print("capture's share of a cudaMalloc+cudaFree pair (on - off, medians of alternating blocks): "
          "%.0f ns with 2 Python frames, %.0f ns with 60 (pair without capture: %.0f / %.0f ns)" %
          (shallow, deep, med(r[2] for r in rows), med(r[3] for r in rows)))
    print("ratio 60 / 2 Python frames: %.2f (per set: %s)" % (med(ratios), " ".join("%.2f" % x for x in ratios)))
    line = [l for l in txt.splitlines() if l.startswith("stack capture cost")]
    if line:
        print("the report's own account: %s" % line[0])
    print("goal: <= 1.5x: %s" % ("met" if med(ratios) <= 1.5 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
