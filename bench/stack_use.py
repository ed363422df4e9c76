#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Stack bytes one warm cudaMalloc+cudaFree uses on the calling thread: the
# program paints its thread's stack below its frame, allocates and frees once, and counts the
# bytes touched (tests/hostile/limits_prog.cpp stack_use). Measured without the preload (the
# baseline of the same run), with it and stacks on, and with stacks off. Goal: the profiler's
# own share a few KB (<= 6 KiB with stacks on), so that 16 KiB threads and 8 KiB coroutines live.
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness"))
from preload_env import preload_env  # noqa: E402


def measure(args, preload, extra):
    env = preload_env(args.sim_dir, args.lib if preload else None, output=os.path.join(args.tmp, "out-%p"),
                      extra=extra)
    out = subprocess.run([args.prog, "stack_use"], env=env, capture_output=True, text=True, timeout=60).stdout
    for line in out.splitlines():
        if line.startswith("stack_bytes="):
            return int(line.split("=", 1)[1])
    sys.exit("no stack_bytes in: " + out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim-dir", required=True)
    args = ap.parse_args()
    import tempfile
    with tempfile.TemporaryDirectory(prefix="gpumemprof_stack_use_") as tmp:
        args.tmp = tmp
        base = measure(args, False, {})
        on = measure(args, True, {})
        off = measure(args, True, {"GPUMEMPROF_STACK_DEPTH": "0"})
    print("stack bytes per cudaMalloc+cudaFree: without the preload %d, stacks on %d (+%d), stacks off %d (+%d)"
          % (base, on, on - base, off, off - base))
    ok = on - base <= 6144
    print("%s: the profiler's own stack use with stacks on is %d bytes (goal <= 6144)" % ("PASS" if ok else "FAIL", on - base))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
