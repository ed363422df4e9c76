# SPDX-License-Identifier: MIT
# The gpumemprof package under the preload, on the simulated device (SIMCUDA_CAPACITY=64M):
# every function checked by value. Lines marked "@site:NAME" are looked up by the checks.
import ctypes
import io
import json
import os
import sys
import threading
import time

import gpumemprof as gp

MIB = 1 << 20
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
failures = []


def check(what, cond, detail=""):
    print("  %s %s%s" % ("ok  " if cond else "FAIL", what, "" if cond else "  " + str(detail)[:2000]))
    if not cond:
        failures.append(what)


def site(name):
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if "@site:" + name in line and "def site" not in line:
                return n
    raise KeyError(name)


def malloc(n):
    p = ctypes.c_void_p()
    rc = cudart.cudaMalloc(ctypes.byref(p), n)  # @site:malloc
    return rc, p.value


def before_block():
    return malloc(1 * MIB)  # @site:before


def inside_block():
    return malloc(2 * MIB)  # @site:inside


def after_block():
    return malloc(4 * MIB)  # @site:after


def main():
    check("is_available", gp.is_available())
    check("zero config: PyTorch keeps its own allocator (PYTORCH_NO_CUDA_MEMORY_CACHING not set)",
          os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") is None, os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"))
    check("zero config: JAX keeps its allocator (XLA_PYTHON_CLIENT_ALLOCATOR not set)",
          os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR") is None, os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR"))
    check("memory_allocated() before any allocation is 0", gp.memory_allocated() == 0, gp.memory_allocated())

    rc, p3 = malloc(3 * MIB)
    check("cudaMalloc 3 MiB ok", rc == 0, rc)
    check("memory_allocated() == 3 MiB", gp.memory_allocated() == 3 * MIB, gp.memory_allocated())
    check("memory_allocated(0) == 3 MiB", gp.memory_allocated(0) == 3 * MIB, gp.memory_allocated(0))
    # PyTorch's rule: 1 MiB < size <= 10 MiB opens a 20 MiB segment.
    check("memory_reserved() == 20 MiB", gp.memory_reserved() == 20 * MIB, gp.memory_reserved())
    st = gp.memory_stats()
    check("memory_stats()['allocated_bytes.all.current'] == 3 MiB",
          st.get("allocated_bytes.all.current") == 3 * MIB, st.get("allocated_bytes.all.current"))
    check("memory_stats()['segment.all.current'] == 1", st.get("segment.all.current") == 1, st.get("segment.all.current"))
    check("memory_stats()['requested_bytes.all.current'] == 3 MiB",
          st.get("requested_bytes.all.current") == 3 * MIB, st.get("requested_bytes.all.current"))

    snap = gp.snapshot()
    blocks = [b for s in snap.get("segments", []) for b in s.get("blocks", [])]
    active = [b for b in blocks if b.get("state") == "active_allocated"]
    check("snapshot(): one 20 MiB segment", [s.get("total_size") for s in snap.get("segments", [])] == [20 * MIB],
          [s.get("total_size") for s in snap.get("segments", [])])
    check("snapshot(): one active_allocated block of 3 MiB", [b.get("size") for b in active] == [3 * MIB], active)
    frames = active[0].get("frames", []) if active else []
    check("snapshot(): the block's frames name this file's malloc line",
          any(f.get("filename", "").endswith("prog_package.py") and f.get("line") == site("malloc") and
              f.get("name") == "malloc" for f in frames), frames[:6])
    check("snapshot(): has device_traces", isinstance(snap.get("device_traces"), list))

    cudart.cudaFree(p3)
    check("after free: memory_allocated() == 0, reserved still 20 MiB",
          (gp.memory_allocated(), gp.memory_reserved()) == (0, 20 * MIB), (gp.memory_allocated(), gp.memory_reserved()))
    gp.empty_cache()
    check("empty_cache(): memory_reserved() == 0", gp.memory_reserved() == 0, gp.memory_reserved())
    check("max_memory_allocated() == 3 MiB", gp.max_memory_allocated() == 3 * MIB, gp.max_memory_allocated())
    check("max_memory_reserved() == 20 MiB", gp.max_memory_reserved() == 20 * MIB, gp.max_memory_reserved())
    gp.reset_peak_memory_stats()
    check("reset_peak_memory_stats(): max allocated and reserved back to 0",
          (gp.max_memory_allocated(), gp.max_memory_reserved()) == (0, 0),
          (gp.max_memory_allocated(), gp.max_memory_reserved()))
    check("before reset_accumulated: allocation.all.allocated == 1",
          gp.memory_stats().get("allocation.all.allocated") == 1, gp.memory_stats().get("allocation.all.allocated"))
    gp.reset_accumulated_memory_stats()
    check("reset_accumulated_memory_stats(): allocation.all.allocated == 0",
          gp.memory_stats().get("allocation.all.allocated") == 0, gp.memory_stats().get("allocation.all.allocated"))

    # LineProfile: only what the block allocated.
    rc, pa = before_block()  # @site:call_before
    with gp.LineProfile() as prof:
        rc, pb = inside_block()  # @site:call_inside
    rc, pc = after_block()  # @site:call_after
    out = io.StringIO()
    prof.print_report(file=out)
    text = out.getvalue()
    lines = text.splitlines()
    # 2 MiB opens a 20 MiB segment (the 1 MiB before went to the small pool).
    check("LineProfile: _root (2.00MB, 20.00MB) first", lines[:1] == ["_root (2.00MB, 20.00MB)"], text)
    expect = [("main", site("call_inside")), ("inside_block", site("inside")), ("malloc", site("malloc"))]
    ok = True
    for depth, (fn, line) in enumerate(expect, 1):
        want = "%s%s:%d:%s (2.00MB, 20.00MB)" % ("  " * (depth + 1), __file__, line, fn)
        ok = ok and want in lines
    check("LineProfile: main -> inside_block -> malloc, nested, (2.00MB, 20.00MB) each", ok, text)
    check("LineProfile: nothing from before or after the block",
          ":%d:" % site("before") not in text and ":%d:" % site("after") not in text, text)
    check("LineProfile: Python frames only by default (no native frames)", "libffi" not in text and "+0x" not in text,
          text)
    with gp.LineProfile(max_depth=1) as prof1:
        malloc(2 * MIB)
    lines1 = prof1.report().splitlines()
    check("LineProfile(max_depth=1): _root and the innermost line only",
          len(lines1) == 2 and lines1[1] == "  %s:%d:malloc (2.00MB, 0.00B)" % (__file__, site("malloc")), lines1)

    # set_stack_depth
    check("set_stack_depth(0) returns the previous 64", gp.set_stack_depth(0) == 64)
    check("stack_depth() == 0", gp.stack_depth() == 0)
    check("set_stack_depth(64) returns 0", gp.set_stack_depth(64) == 0)

    # OOM observer: one failed request (the GIL released by ctypes.CDLL) -> exactly one call.
    calls = []
    got = threading.Event()

    def observer(device, requested, allocated, free):
        calls.append((device, requested, allocated, free))
        got.set()

    gp.attach_out_of_memory_observer(observer)
    allocated_before = gp.memory_allocated()
    rc, _ = malloc(1 << 30)  # @site:oom
    check("1 GiB request fails with cudaErrorMemoryAllocation (2)", rc == 2, rc)
    got.wait(10)
    time.sleep(0.3)
    gp.memory_allocated()  # a package call also delivers pending OOMs: must not repeat this one
    time.sleep(0.2)
    check("OOM observer called exactly once", len(calls) == 1, calls)
    if calls:
        check("observer args: device 0, 1 GiB requested, allocated as the pool had it",
              calls[0][:3] == (0, 1 << 30, allocated_before), calls[0])
        check("observer args: device_free > 0", calls[0][3] > 0, calls[0])

    # Steps: numbered from 0 unless given; each records what the pool holds when it begins.
    check("mark_step() numbers the first step 0", gp.mark_step() == 0)
    held = malloc(3 << 20)
    allocated_at_1 = gp.memory_allocated()
    check("mark_step() then numbers the next 1", gp.mark_step() == 1)
    check("mark_step(7) records step 7", gp.mark_step(7) == 7)
    check("and the one after it is 8", gp.mark_step() == 8)

    path = os.path.join(os.environ["PKG_TEST_DIR"], "dumped")
    check("dump(prefix) writes <prefix>.json", gp.dump(path) and os.path.exists(path + ".json"))
    report = json.load(open(path + ".json"))
    check("report's framework_env lists what was set",
          report.get("framework_env") == [],
          report.get("framework_env"))
    steps = report.get("steps", [])
    check("the report's steps are 0, 1, 7, 8", [x["step"] for x in steps] == [0, 1, 7, 8], steps)
    check("step 1 began with the 3 MiB block allocated",
          len(steps) == 4 and steps[1]["devices"][0]["allocated"] == allocated_at_1 == steps[0]["devices"][0]["allocated"] + (3 << 20),
          steps)
    check("steps in time order", [x["t_ns"] for x in steps] == sorted(x["t_ns"] for x in steps), steps)
    cudart.cudaFree(ctypes.c_void_p(held[1]))
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
