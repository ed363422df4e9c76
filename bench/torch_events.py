#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Benchmark: what the attached profiler costs a training loop that allocates through PyTorch's
# allocator, on the stand-in for it (tests/preload/torch/lib) over the simulated device. A step:
# forward ops 30 Python frames deep (each makes an autograd node, an output kept for backward
# and a temporary), a backward pass on the same thread (each node allocates a gradient input
# and frees the saved output), an optimizer step from a file under torch/optim/ (temporaries,
# and state the first time). Three modes in alternating rounds, one process each:
#   plain: no preload;  off: preload, GPUMEMPROF_STACK_DEPTH=0;  attach: preload, defaults.
# Prints ms a step (median over rounds of each process's median), the ratios, and what the
# report says an event cost by part (stacks.torch_events). No goal here: the H200's figures and
# goals are in docs/measurements.md; this one shows which part moves when the code changes.
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness"))
from preload_env import preload_env  # noqa: E402

CHILD = r'''
import ctypes, os, sys, time
lib_dir, steps = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[3])))
c10 = ctypes.CDLL(os.path.join(lib_dir, "libc10_cuda.so"))
cpu = ctypes.CDLL(os.path.join(lib_dir, "libtorch_cpu.so"))
c10.fake_torch_malloc.restype = ctypes.c_void_p
c10.fake_torch_malloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t, ctypes.c_ulonglong, ctypes.c_ulonglong]
c10.fake_torch_free.argtypes = [ctypes.c_void_p]
cpu.fake_autograd_op.restype = ctypes.c_uint64
cpu.fake_autograd_op.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
cpu.fake_autograd_enter.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
from torch.optim import sgd_standin

def layer(depth, n, saved):
    if depth > 0:
        return layer(depth - 1, n, saved)
    th = ctypes.c_uint64(0)
    for i in range(n):
        seq = cpu.fake_autograd_op(ctypes.byref(th))
        saved.append((seq, th.value, c10.fake_torch_malloc((i % 7 + 1) << 18, 0, 0, 0)))
        t = c10.fake_torch_malloc(1 << 16, 0, 0, 0)
        c10.fake_torch_free(t)

def backward(saved):
    grads = []
    for seq, th, p in reversed(saved):
        cpu.fake_autograd_enter(0, seq, th)
        grads.append(c10.fake_torch_malloc(1 << 18, 0, 0, 0))
        c10.fake_torch_free(p)
        cpu.fake_autograd_leave()
    return grads

states, params, times = [], [(i % 5 + 1) << 18 for i in range(60)], []
for s in range(steps):
    t0 = time.perf_counter()
    saved = []
    for _ in range(12):
        layer(30, 20, saved)
    grads = backward(saved)
    sgd_standin.step(c10, params, states)
    for g in grads:
        c10.fake_torch_free(g)
    times.append(time.perf_counter() - t0)
times = sorted(times[3:])
print("STEP_MS=%.4f" % (times[len(times) // 2] * 1e3))
'''

OPTIM = '''def step(lib, params, states):
    out = [lib.fake_torch_malloc(p, 0, 0, 0) for p in params]  # the step's temporaries
    for q in out:
        lib.fake_torch_free(q)
    if not states:  # state made in the first step, kept
        states.extend(lib.fake_torch_malloc(2 * p, 0, 0, 0) for p in params[:20])
'''


def run(args, mode, tmp, child):
    out = os.path.join(tmp, mode)
    extra = {"GPUMEMPROF_HTML": "0", "GPUMEMPROF_PICKLE": "0"}
    if mode == "off":
        extra["GPUMEMPROF_STACK_DEPTH"] = "0"
    env = preload_env(args.sim_dir, args.lib if mode != "plain" else None, output=out, extra=extra)
    p = subprocess.run([sys.executable, child, args.torch_lib, str(args.steps), child], env=env,
                       capture_output=True, text=True, timeout=300)
    ms = [float(l.split("=")[1]) for l in p.stdout.splitlines() if l.startswith("STEP_MS=")]
    cost = None
    if mode != "plain" and os.path.exists(out + ".json"):
        cost = json.load(open(out + ".json")).get("stacks", {}).get("torch_events")
    if p.returncode != 0 or not ms:
        sys.exit("%s: exit %d: %s" % (mode, p.returncode, p.stderr[-2000:]))
    return ms[0], cost


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--torch-lib", required=True, help="the stand-in's lib/ folder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="torch-events-")
    os.makedirs(os.path.join(tmp, "torch", "optim"))
    with open(os.path.join(tmp, "torch", "optim", "sgd_standin.py"), "w") as f:
        f.write(OPTIM)
    open(os.path.join(tmp, "torch", "__init__.py"), "w").close()
    open(os.path.join(tmp, "torch", "optim", "__init__.py"), "w").close()
    child = os.path.join(tmp, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    modes = ("plain", "off", "attach")
    rounds, costs = [], []
    for r in range(a.rounds):
        order = modes if r % 2 == 0 else tuple(reversed(modes))
        row = {}
        for m in order:
            row[m], cost = run(a, m, tmp, child)
            if m == "attach" and cost:
                costs.append(cost)
        rounds.append(row)
    med = statistics.median
    step = {m: med(r[m] for r in rounds) for m in modes}
    print("ms a step (median of %d rounds): plain %.3f, preload with stacks off %.3f, attached %.3f" %
          (a.rounds, step["plain"], step["off"], step["attach"]))
    print("attached / plain %.2f (rounds: %s); attached / stacks off %.2f" % (
        med(r["attach"] / r["plain"] for r in rounds), " ".join("%.2f" % (r["attach"] / r["plain"]) for r in rounds),
        med(r["attach"] / r["off"] for r in rounds)))
    if costs:
        n = costs[0]["events"]
        us = lambda k: med(c[k] / c["events"] * 1e6 for c in costs)
        print("an event in the profiler: %.2f us (stacks %.2f, backward to forward %.2f, a site's traits %.2f, kinds %.2f, "
              "mirror %.2f, handover %.3f; on the profiler's thread %.2f); %d events a run" % (
                  us("seconds"), us("stacks_seconds"), us("backward_seconds"), us("traits_seconds"), us("kinds_seconds"),
                  us("mirror_seconds"), us("handover_seconds"), us("deferred_seconds"), n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
