#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Benchmark: `gpumemprof merge` of 1,024 rank reports the size of the H200 PyTorch loop's (its 97
# call sites with their frames, 122 memory_stats keys, a 512-point timeline; built from the
# recorded page docs/results/torch-loop-h200-2026-12-01.html, each rank's bytes scaled and some
# sites on some ranks only). Goals: under 30 s; memory bounded: the merge of 1,024 reports holds
# no more than 2x the memory of the merge of 64 of them (the baseline, run in the same run), and
# its CPU time per report is at most 1.5x the baseline's. The 30 s hold on one core (--jobs 1) too. Also the map-reduce path: four --partial
# merges of 256 reports, then the merge of the four partials.
# Usage: merge_scale.py GPUMEMPROF H200_PAGE [--ranks N]
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

GOAL_S = 30.0


def template(page):
    with open(page) as f:
        text = f.read()
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1))
    frames = [{"function": f[0], "file": f[1], "line": f[2], "module": f[3], "offset": i,
               "kind": "python" if len(f) > 5 and f[5] else "native"} for i, f in enumerate(data["frames"])]
    dev = data["devices"][0]
    series = dev["series"]
    n = len(series["t0"])
    per = max(1, -(-n // 512))
    points = [(series["t0"][i], max(series["allocated"]["max"][i:i + per]), max(series["reserved"]["max"][i:i + per]))
              for i in range(0, n, per)]
    return data, frames, dev, points


def report(rank, ranks, data, frames, dev, points):
    scale = 1.0 + (rank % 8) / 8.0  # eight pipeline stages, the last holding most
    sites = []
    for i, s in enumerate(data["sites"]):
        if i % 16 == 5 and rank % 4 != 0:  # a few sites on every fourth rank only (hot experts)
            continue
        at_peak = int(s[5] * scale)
        sites.append({"frames": [frames[j] for j in s[0]], "live_bytes": s[1], "live_count": s[8],
                      "total_bytes": int(s[2] * scale), "total_count": s[3], "requested_bytes": s[2],
                      "used_bytes": s[2], "acquired_bytes": s[4], "peak_live_bytes": at_peak,
                      "peak_live_count": s[8], "peak_acquired_bytes": s[6]})
    stats = dict(dev["memory_stats"])
    stats["allocated_bytes.all.peak"] = int(dev["peak"]["allocated"] * scale)
    stats["reserved_bytes.all.peak"] = int(dev["peak"]["reserved"] * scale)
    timeline = {"points_cover_ns": 0, "changes": data["devices"][0]["series"]["changes"],
                "peak_allocated": stats["allocated_bytes.all.peak"], "peak_allocated_t_ns": dev["peak"]["allocated_t"],
                "reserved_at_peak_allocated": stats["reserved_bytes.all.peak"],
                "peak_reserved": stats["reserved_bytes.all.peak"], "peak_reserved_t_ns": dev["peak"]["reserved_t"],
                "t_ns": [p[0] for p in points], "allocated": [int(p[1] * scale) for p in points],
                "reserved": [int(p[2] * scale) for p in points], "ooms": []}
    return {"version": 1, "pid": 1000 + rank, "host": "node%03d" % (rank // 8), "exe": data["meta"]["exe"],
            "rank": rank, "local_rank": rank % 8, "world_size": ranks, "rank_from": "RANK",
            "cuda_visible_devices": "", "start_time_ns": 1764600000000000000 + rank * 1000003,
            "steps": [], "steps_dropped": 0, "alloc_conf": "", "pool": "caching",
            "seconds_profiled": data["meta"]["seconds_profiled"],
            "devices": [{"device": 0, "context": 0, "context_alive": True, "memory_stats": stats,
                         "at_reserved_peak": dev["at_reserved_peak"], "timeline": timeline}],
            "sites": sites, "peak": {"bytes": data["peak"]["bytes"], "devices": [], "sites": []},
            "leaks": {"bytes": 0, "count": 0, "sites": []}, "ooms": [], "stacks": {}}


def run(cmd, stdout=subprocess.DEVNULL):
    """Wall seconds, CPU seconds (user + system) and peak RSS (KiB) of one child."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit("%s failed (%d): %s" % (cmd[:3], p.returncode, err[-500:]))
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("page")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--baseline", type=int, default=64)
    args = ap.parse_args()
    data, frames, dev, points = template(args.page)
    work = tempfile.mkdtemp(prefix="merge-bench-")
    try:
        files = []
        t0 = time.monotonic()
        for r in range(args.ranks):
            path = os.path.join(work, "rank%d.json" % r)
            with open(path, "w") as f:
                json.dump(report(r, args.ranks, data, frames, dev, points), f, separators=(",", ":"))
            files.append(path)
        total = sum(os.path.getsize(p) for p in files)
        print("inputs: %d reports of %.0f KiB each (%.0f MiB in all, %d sites, %d timeline points), written in "
              "%.1f s" % (args.ranks, total / args.ranks / 1024, total / 2**20, len(data["sites"]), len(points),
                          time.monotonic() - t0))
        base_s, base_cpu, base_kib = min(run([args.cli, "merge", "--json"] + files[:args.baseline]) for _ in range(2))
        all_s, all_cpu, all_kib = run([args.cli, "merge", "--json"] + files)
        one_s, _, _ = run([args.cli, "merge", "--json", "--jobs", "1"] + files)
        # The map-reduce path: four partial merges, then the merge of the partials.
        parts, part_s = [], 0.0
        for i in range(4):
            part = os.path.join(work, "part%d.jsonl" % i)
            group = files[i * args.ranks // 4:(i + 1) * args.ranks // 4]
            with open(part, "w") as out:
                s, _, _ = run([args.cli, "merge", "--partial"] + group, stdout=out)
            part_s = max(part_s, s)
            parts.append(part)
        reduce_s, _, reduce_kib = run([args.cli, "merge", "--json"] + parts)
        # CPU time per report: the machine's other load changes wall times from run to run.
        per_base = base_cpu / args.baseline
        per_all = all_cpu / args.ranks
        print("baseline: merge of %d reports %.2f s, CPU %.1f ms a report, peak RSS %.1f MiB" %
              (args.baseline, base_s, per_base * 1e3, base_kib / 1024))
        print("merge of %d reports: %.2f s, CPU %.1f ms a report, peak RSS %.1f MiB" %
              (args.ranks, all_s, per_all * 1e3, all_kib / 1024))
        print("merge of %d reports on one core (--jobs 1): %.2f s (%.1f ms each)" % (args.ranks, one_s,
                                                                                   one_s / args.ranks * 1e3))
        print("map-reduce: slowest of 4 partial merges %.2f s, merge of the partials %.2f s (peak RSS %.1f MiB)" %
              (part_s, reduce_s, reduce_kib / 1024))
        checks = [
            ("merge of %d reports in %.2f s, %.2f s on one core (goal < %.0f s)" % (args.ranks, all_s, one_s, GOAL_S),
             max(all_s, one_s) < GOAL_S),
            ("CPU time per report %.2fx the baseline's (goal <= 1.5x)" % (per_all / per_base), per_all / per_base <= 1.5),
            ("peak RSS %.2fx the baseline's for %dx the inputs (goal <= 2x)" %
             (all_kib / base_kib, args.ranks // args.baseline), all_kib / base_kib <= 2.0),
        ]
        for text, ok in checks:
            print("%s: %s" % ("PASS" if ok else "FAIL", text))
        return 0 if all(ok for _, ok in checks) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
