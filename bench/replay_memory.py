#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Peak memory of `gpumemprof replay` and `gpumemprof report` on synthetic traces of N and
# FACTOR x N events (bench_replay --write: a bounded live set, sizes 512 B to 64 MiB, a segment
# now and then), each run in a child process whose peak RSS bench_replay --peak-rss reads with
# wait4. Both read the trace a block at a time, so their memory follows what is live at a time,
# not the trace's length: the goal is that FACTOR times the events costs at most 1.25x the memory
# (and under 2 GiB), which is what lets a day-long trace of 1e9 events replay. With --base-cli the
# same runs are made with an older gpumemprof (which loaded the whole trace) for comparison.
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib

GOAL_RATIO = 1.25
GOAL_BYTES = 2 << 30


def run_child(gen, args):
    """Peak RSS in bytes and seconds of one child, spawned by bench_replay --peak-rss (a small
    process: a child forked from Python would count Python's RSS as its own until its exec)."""
    t0 = time.monotonic()
    p = subprocess.run([gen, "--peak-rss"] + args, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit("%s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr[-1000:]))
    kib = [int(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("peak_rss_kib ")]
    if not kib:
        sys.exit("no peak_rss_kib line from %s" % gen)
    return kib[-1] * 1024, seconds


def as_version_2(src, dst):
    """The synthetic trace uses no version-3 field (every event in context 0 and the default pool,
    so no extension byte): with its header's version set to 2 (and the header CRC redone) it is a
    valid version-2 file, which an older gpumemprof reads."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    body = struct.unpack_from("<I", data, 12)[0]
    struct.pack_into("<I", data, 8, 2)
    struct.pack_into("<I", data, 16 + body, zlib.crc32(bytes(data[:16 + body])) & 0xFFFFFFFF)
    with open(dst, "wb") as f:
        f.write(data)


def measure(gen, cli, trace, tmp):
    replay = run_child(gen, [cli, "replay", "--json", trace])
    report = run_child(gen, [cli, "report", trace, "--html", os.path.join(tmp, "r.html"), "--txt",
                             os.path.join(tmp, "r.txt")])
    return replay, report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen", required=True, help="bench_replay (writes the synthetic traces)")
    ap.add_argument("--cli", required=True, help="gpumemprof to measure")
    ap.add_argument("--base-cli", help="an older gpumemprof to compare with (optional)")
    ap.add_argument("--events", type=int, default=2_000_000, help="events of the smaller trace")
    ap.add_argument("--factor", type=int, default=8, help="the larger trace has FACTOR x as many")
    args = ap.parse_args()
    clis = [("this build", args.cli)] + ([("base", args.base_cli)] if args.base_cli else [])
    rows = {}
    with tempfile.TemporaryDirectory(prefix="gpumemprof_replay_memory_") as tmp:
        for n in (args.events, args.events * args.factor):
            trace = os.path.join(tmp, "t.gmt")
            subprocess.run([args.gen, "--write", trace, str(n)], check=True)
            size = os.path.getsize(trace)
            for name, cli in clis:
                path = trace
                if name == "base":
                    path = os.path.join(tmp, "t2.gmt")
                    as_version_2(trace, path)
                rows[(name, n)] = (size, measure(args.gen, cli, path, tmp))
                if path != trace:
                    os.unlink(path)
            os.unlink(trace)
    mib = lambda b: b / (1 << 20)
    print("peak RSS of gpumemprof replay / report (child processes, wait4)")
    print("  %-11s %12s %10s %16s %16s" % ("", "events", "trace", "replay", "report"))
    for (name, n), (size, ((rr, rt), (pr, pt))) in sorted(rows.items(), key=lambda kv: (kv[0][0] != "this build", kv[0][1])):
        print("  %-11s %12d %7.1f MiB %8.1f MiB %4.1fs %8.1f MiB %4.1fs" % (name, n, mib(size), mib(rr), rt, mib(pr), pt))
    small, big = args.events, args.events * args.factor
    ok = True
    for i, what in ((0, "replay"), (1, "report")):
        a = rows[("this build", small)][1][i][0]
        b = rows[("this build", big)][1][i][0]
        ratio = b / a
        passed = ratio <= GOAL_RATIO and b < GOAL_BYTES
        ok = ok and passed
        print("%s: %s with %dx the events takes %.2fx the memory (%.1f MiB; goal <= %.2fx and < 2 GiB)"
              % ("PASS" if passed else "FAIL", what, args.factor, ratio, mib(b), GOAL_RATIO))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
