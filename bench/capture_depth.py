#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Benchmark: what capturing a stack costs as the Python stack gets deeper, in one process, against
# the same capture with 2 Python frames measured in the same run (alternating rounds).
#   repeated: the same stack captured over and over (a training loop's allocations); 60 Python
#             frames, each a different function, plus the native frames below (the interpreter's,
#             ctypes', libffi's). Goal: at most 1.5x the 2-frame capture.
#   cold:     every capture from a stack never captured before, 60 Python frames: either a new
#             innermost line (the outer frames' tree nodes exist) or a new line near the root (all
#             frames new to the tree). Goal: at most 1.5 us.
# Capture is timed inside the library with the time-stamp counter (bench/capture_probe.cpp).
import argparse
import ctypes
import functools
import os
import statistics
import sys


def load(path):
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.gpumemprof_bench_repeat.restype = ctypes.c_double
    lib.gpumemprof_bench_repeat.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.gpumemprof_bench_once.restype = ctypes.c_double
    lib.gpumemprof_bench_evicted.restype = ctypes.c_double
    lib.gpumemprof_bench_evicted.argtypes = [ctypes.c_int, ctypes.c_size_t]
    lib.gpumemprof_bench_frames.restype = ctypes.c_int
    lib.gpumemprof_bench_frames.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.gpumemprof_bench_nodes.restype = ctypes.c_double
    return lib


def make_chain(length, tag):
    """f0 -> f1 -> ... -> f(length-1) -> k(): `length` distinct Python functions."""
    src = []
    for i in range(length - 1):
        src.append("def %s%d(k):\n    return %s%d(k)\n" % (tag, i, tag, i + 1))
    src.append("def %s%d(k):\n    return k()\n" % (tag, length - 1))
    ns = {}
    exec(compile("".join(src), "<chain %s>" % tag, "exec"), ns)
    return ns["%s0" % tag]


def make_lines(count, body, name):
    """A function whose `count` lines each make the same call from another line."""
    src = "def %s(k, out):\n" % name + "".join("    out.append(%s)\n" % body for _ in range(count))
    ns = {}
    exec(compile(src, "<%s>" % name, "exec"), ns)
    return ns[name]


def frames(lib):
    py = ctypes.c_int(0)
    total = lib.gpumemprof_bench_frames(ctypes.byref(py))
    return total, py.value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True, help="capture_probe shared module")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--deep", type=int, default=60)
    ap.add_argument("--cold", type=int, default=2000, help="new stacks per cold measurement")
    ap.add_argument("--evict", type=int, default=1 << 20,
                    help="bytes written between two captures in the 'caches evicted' rows")
    a = ap.parse_args()
    lib = load(a.probe)

    # How many Python frames sit below a call made right here (this function and <module>).
    lib.gpumemprof_bench_once()
    base = frames(lib)[1]
    repeat = functools.partial(lib.gpumemprof_bench_repeat, 40, 200)  # a C callable: no frame of its own
    deep = make_chain(a.deep - base, "d")  # base + (deep - base) Python frames at the capture

    # Learn the rules and code objects once, then check the depths. Both call through the same
    # partial object, so that both stacks have the same native frames.
    # A training loop's functions have run many times before: so have the chain's here, so that
    # the interpreter has specialised their calls (3.11 gives a function its version then).
    for _ in range(200):
        deep(int)
    repeat()  # called from here: `base` Python frames (2)
    shallow_frames = frames(lib)
    deep(repeat)
    deep_frames = frames(lib)
    rows = []
    for _ in range(a.rounds):
        s = repeat()
        d = deep(repeat)
        rows.append((s, d, d / s))
    # Which compare the repeated deep stack got: frames compared, and of those, frames taken
    # without reading their code objects (on the count of destroyed code objects: a code watcher
    # on 3.12+, PyCode_Type's deallocator on 3.11).
    py_probe = getattr(lib, "gpumemprof_bench_python_once", None)
    if py_probe is not None:
        py_probe.restype = ctypes.c_double
        py_probe.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    compared = ctypes.c_int(0)
    trusted = ctypes.c_int(0)
    deep_compare = None
    if py_probe is not None:
        # A C callable, as `repeat` is: the same Python frames as the timed stack. The second
        # capture repeats the first one's stack.
        probe = functools.partial(py_probe, ctypes.byref(compared), ctypes.byref(trusted))
        deep(probe)
        deep(probe)
        deep_compare = (compared.value, trusted.value)
    # The same stacks, each capture after the program's own work has moved their lines out of the
    # nearer caches (a framework between two allocations): what a training step sees.
    evicted = functools.partial(lib.gpumemprof_bench_evicted, 2000, a.evict)
    evicted_rows = []
    for _ in range(a.rounds):
        s = evicted()
        d = deep(evicted)
        evicted_rows.append((s, d))

    # Cold, new innermost line: the chain's last call goes to a function (one more frame) whose
    # `a.cold` lines each capture once: every capture a stack not seen before.
    inner = make_chain(a.deep - base - 1, "i")
    leaf = make_lines(a.cold, "k()", "leaf")
    out_inner = []
    inner(lambda: leaf(lib.gpumemprof_bench_once, out_inner))
    inner_frames = frames(lib)
    # Cold, every frame new: `a.cold` lines near the root each call a 60-frame chain; the stacks
    # differ from their second frame on, so almost every frame is a new tree node.
    chain = make_chain(a.deep - base - 1, "c")
    top = make_lines(a.cold, "chain(k)", "top")
    top.__globals__["chain"] = chain
    out_all = []
    nodes0 = lib.gpumemprof_bench_nodes()
    top(lib.gpumemprof_bench_once, out_all)
    all_frames = frames(lib)
    new_nodes = (lib.gpumemprof_bench_nodes() - nodes0) / a.cold

    # Alternating inner frames: one framework operator after another. Under the same outer chain,
    # captures alternate between a path of 1 more frame and one of 3 more (another depth, so other
    # frame addresses) and, at the depth they share, other functions: each capture's stack differs
    # from the previous one in its inner frames only.
    outer = make_chain(a.deep - base - 4, "o")
    one = make_chain(1, "p")
    three = make_chain(3, "q")
    alt_ns, alt_py_ns, alt_compared = [], [], []

    def grab():  # one function object (a lambda made in the loop would be another each time)
        alt_ns.append(lib.gpumemprof_bench_once())

    def grab_python():
        alt_py_ns.append(py_probe(ctypes.byref(compared), ctypes.byref(trusted)))
        alt_compared.append(compared.value)

    def alternate(take):
        for i in range(2 * a.cold):
            (one if i % 2 == 0 else three)(take)
    outer(lambda: alternate(grab))
    if py_probe is not None:  # the same, reading the Python frames alone
        outer(lambda: alternate(grab_python))
    alt_frames = frames(lib)

    med = statistics.median
    ratio = med(r[2] for r in rows)
    print("interpreter: %s %s" % (sys.executable, sys.version.split()[0]))
    print("repeated stack, %d Python + %d native frames: %.0f ns a capture (median of %d rounds)" %
          (shallow_frames[1], shallow_frames[0] - shallow_frames[1], med(r[0] for r in rows), a.rounds))
    print("repeated stack, %d Python + %d native frames: %.0f ns a capture" %
          (deep_frames[1], deep_frames[0] - deep_frames[1], med(r[1] for r in rows)))
    print("ratio deep / shallow, same round: %.2f (rounds: %s)" % (ratio, " ".join("%.2f" % r[2] for r in rows)))
    if deep_compare is not None:
        print("the repeated deep stack's Python frames: %d compared, %d of them without reading their code objects "
              "(the count of destroyed code objects: a code watcher on 3.12+, PyCode_Type's deallocator on 3.11)"
              % deep_compare)
    print("repeated stack, caches evicted (%d KiB written between captures): %.0f ns with %d Python frames, "
          "%.0f ns with %d" % (a.evict // 1024, med(r[0] for r in evicted_rows), shallow_frames[1],
                               med(r[1] for r in evicted_rows), deep_frames[1]))
    print("cold, new innermost line, %d Python + %d native frames: median %.0f ns, p90 %.0f ns (%d stacks)" %
          (inner_frames[1], inner_frames[0] - inner_frames[1], med(out_inner),
           sorted(out_inner)[int(len(out_inner) * 0.9)], len(out_inner)))
    print("cold, every frame new (%.0f new tree nodes each), %d Python + %d native frames: median %.0f ns, "
          "p90 %.0f ns" % (new_nodes, all_frames[1], all_frames[0] - all_frames[1], med(out_all),
                           sorted(out_all)[int(len(out_all) * 0.9)]))
    print("alternating inner frames (1 or 3 under the same outer chain), up to %d Python + %d native frames: "
          "median %.0f ns a capture" % (alt_frames[1], alt_frames[0] - alt_frames[1], med(alt_ns)) +
          ("; the Python frames alone %.0f ns, %.1f of them compared" % (med(alt_py_ns), med(alt_compared))
           if alt_py_ns else ""))
    print("goal: repeated deep <= 1.5x shallow: %s" % ("met" if ratio <= 1.5 else "NOT met"))
    print("goal: cold capture <= 1.5 us: %s" % ("met" if max(med(out_inner), med(out_all)) <= 1500 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
