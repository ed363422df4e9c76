#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarises the samples of scripts/gpu/sampler.cpp (one line a sample, frames innermost first,
';'-separated): the share of samples inside the profiler, its functions by inclusive samples, and
every module's functions by self samples. The profiler's hidden functions ("libgpumemprof.so+0x..")
are named with addr2line against the unstripped library (--lib, e.g. build-carry/src/libgpumemprof.so).
  scripts/gpu/sampler_report.py --lib build-carry/src/libgpumemprof.so samples.1234 [--top 30]"""
import argparse
import collections
import subprocess


def symbolize(lib, offsets):
    if not offsets or not lib:
        return {}
    offs = sorted(offsets)
    p = subprocess.run(["addr2line", "-f", "-C", "-e", lib] + ["0x%x" % (o - 1) for o in offs],
                       capture_output=True, text=True)
    lines = p.stdout.splitlines()
    return {o: lines[2 * i] for i, o in enumerate(offs) if 2 * i < len(lines)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--tid", type=int, default=None, help="SAMPLER_MODE=wall: this thread's samples only")
    ap.add_argument("--busiest", type=int, default=0,
                    help="SAMPLER_MODE=wall: the samples of the N threads with the most samples outside waits")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    samples, tids = [], collections.Counter()
    for f in a.files:
        with open(f) as fh:
            for line in fh:
                if not line.strip():
                    continue
                frames = line.rstrip(";\n").split(";")
                tid = None
                if frames and frames[0].startswith("tid:"):
                    tid = int(frames[0][4:])
                    frames = frames[1:]
                tids[tid] += 1
                # Frame 0 is the signal trampoline (__restore_rt) the handler returns through.
                samples.append((tid, frames[1:]))
    if a.tid is not None:
        samples = [s for s in samples if s[0] == a.tid]
    if len(tids) > 1:
        print("samples by thread: " + ", ".join("%s: %d" % t for t in tids.most_common(12)))
    samples = [s[1] for s in samples]
    offsets = {int(fr.split("+0x")[1], 16) for s in samples for fr in s if "gpumemprof" in fr and "+0x" in fr}
    names = symbolize(a.lib, offsets)

    def name(fr):
        if "gpumemprof" in fr and "+0x" in fr:
            return "gpumemprof!" + names.get(int(fr.split("+0x")[1], 16), fr)[:120]
        return fr[:140]

    inclusive, self_ = collections.Counter(), collections.Counter()
    inside = 0
    for s in samples:
        frames = [name(fr) for fr in s]
        if frames:
            self_[frames[0]] += 1
        ours = {fr for fr in frames if fr.startswith("gpumemprof!")}
        inside += bool(ours)
        inclusive.update(ours)
    n = len(samples)
    print("samples: %d; with a profiler frame: %d (%.1f%%)" % (n, inside, 100.0 * inside / max(n, 1)))
    print("\nprofiler functions, inclusive:")
    for fn, c in inclusive.most_common(a.top):
        print("  %6d %5.1f%%  %s" % (c, 100.0 * c / n, fn))
    modules = collections.Counter()
    for fn, c in self_.items():
        modules[fn.split("!")[0].split("+0x")[0]] += c
    print("\nself, by module:")
    for m, c in modules.most_common(a.top):
        print("  %6d %5.1f%%  %s" % (c, 100.0 * c / n, m))
    print("\nself, every module:")
    for fn, c in self_.most_common(a.top):
        print("  %6d %5.1f%%  %s" % (c, 100.0 * c / n, fn))


if __name__ == "__main__":
    main()
