#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Benchmark: what the profiler costs each thread that allocates, in resident memory and in the
# time of the thread's first allocation. 1,000 threads each allocate and free twice and stay
# alive (bench/thread_rss.cpp); the process's RSS with all of them alive, minus before them, with
# LD_PRELOAD=libgpumemprof.so (defaults: stacks on) and without it, alternating 3 times (medians).
# Goal: the profiler's share a few KiB per thread (libunwind's per-thread cache alone was 256 KiB)
# and a first allocation within a few microseconds of the second.
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(prog, lib, sim, threads, tmp, preload):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEMPROF_", "LD_PRELOAD"))}
    env["LD_LIBRARY_PATH"] = os.path.abspath(sim)
    env["GPUMEMPROF_OUTPUT"] = os.path.join(tmp, "out-%p")
    env["GPUMEMPROF_HTML"] = "0"
    env["GPUMEMPROF_PICKLE"] = "0"
    if preload:
        env["LD_PRELOAD"] = os.path.abspath(lib)
    p = subprocess.run([prog, str(threads)], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit("thread_rss failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prog", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    rows = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.runs):
            for preload in (False, True):
                rows[preload].append(run(a.prog, a.lib, a.sim_dir, a.threads, tmp, preload))
    med = statistics.median

    def grow(r):
        return (r["rss_all_kb"] - r["rss_before_kb"]) / 1024.0

    without, with_ = med(grow(r) for r in rows[False]), med(grow(r) for r in rows[True])
    share_kib = (with_ - without) * 1024.0 / a.threads
    first_extra = med(r["first_us"] - r["second_us"] for r in rows[True]) - \
        med(r["first_us"] - r["second_us"] for r in rows[False])
    print("%d threads alive, each having allocated: RSS +%.1f MiB without the preload, +%.1f MiB with it "
          "(medians of %d alternating runs)" % (a.threads, without, with_, a.runs))
    print("profiler's share: %.1f KiB per thread" % share_kib)
    print("a thread's first allocation: %.1f us with the preload (second: %.1f us), %.1f us without "
          "(second: %.1f us); extra for the first: %.1f us" %
          (med(r["first_us"] for r in rows[True]), med(r["second_us"] for r in rows[True]),
           med(r["first_us"] for r in rows[False]), med(r["second_us"] for r in rows[False]), first_extra))
    print("goal: <= 16 KiB per thread: %s" % ("met" if share_kib <= 16 else "NOT met"))
    print("goal: first allocation <= 20 us more than the second: %s" % ("met" if first_extra <= 20 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
