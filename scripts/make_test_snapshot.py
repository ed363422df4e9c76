#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write a synthetic torch.cuda.memory._dump_snapshot pickle (plain dicts/lists, protocol 4) for tests.

Scenarios:
  basic   (default) a PyTorch-consistent history on two devices, with blocks allocated before
          recording started. Device 0 (stream 0, default settings):
            before recording: A = 3 MiB   at S1      (S1: a 20 MiB segment, A split from it)
                              B = 1000 B  at S2      (S2: a 2 MiB small-pool segment)
            recorded:         alloc D = 5 MiB at S1 + 3 MiB   (from S1's 17 MiB free tail)
                              segment_alloc S3 = 14 MiB; alloc C = 14 MiB at S3 (12 MiB left in S1)
                              free B (its alloc is not in the trace), free D
                              oom (100 GiB requested), snapshot marker
            end state:        S1 [A active 3 MiB | 17 MiB inactive], S2 [2 MiB inactive], S3 [C active]
          Device 1: segment_alloc 2 MiB, alloc 512 B, free it.
  expandable  PyTorch with expandable_segments:True, recorded from the first allocation (device 0,
          stream 0): a = 5 MiB maps a 20 MiB page at X; b = 30 MiB maps the next page and takes the
          free 15 MiB behind a plus 15 MiB of it (X + 5 MiB); free a; s = 1000 B maps a 2 MiB small
          page at Y; free b (X..X+40 MiB one free block); c = 12 MiB at X.
          End state: [c 12 MiB active | 28 MiB inactive] at X, [s 1024 | rest inactive] at Y, both
          is_expandable. Reserved peak 42 MiB, allocated peak 35 MiB (a + b), 3 maps, no segment.
  random  --events N --seed S: an inference-like loop (weights allocated before recording,
          activations of varying sequence length allocated and freed each step); addresses are
          unique, each block live at the end sits in its own segment.

usage: make_test_snapshot.py OUT.pickle [--scenario basic|random] [--events N] [--seed S] [--conf TEXT]
"""

import argparse
import pickle
import random
import sys

MiB = 1 << 20
FRAMES = [
    {"filename": "/app/model.py", "line": 42, "name": "forward"},
    {"filename": "/app/train.py", "line": 7, "name": "main"},
]


def entry(action, addr, size, stream=0, t=0, frames=True):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t}
    if frames:
        e["frames"] = FRAMES
    return e


def segment(device, address, blocks, stream=0, small=False, expandable=False):
    total = sum(b["size"] for b in blocks)
    return {
        "device": device, "address": address, "total_size": total,
        "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
        "active_size": sum(b["size"] for b in blocks if b["state"].startswith("active")),
        "requested_size": sum(b["requested_size"] for b in blocks if b["state"].startswith("active")),
        "stream": stream, "segment_type": "small" if small else "large", "segment_pool_id": (0, 0),
        "is_expandable": expandable, "frames": FRAMES, "blocks": blocks,
    }


def block(size, state, requested=None):
    return {"address": 0, "size": size, "requested_size": size if requested is None else requested,
            "state": state, "frames": FRAMES if state != "inactive" else []}


def basic(conf):
    s1, s2, s3 = 0x7F0000000000, 0x7F0001400000, 0x7F0001600000
    d1 = 0x7E0000000000
    t0 = 1_700_000_000_000_000
    dev0 = [
        entry("alloc", s1 + 3 * MiB, 5 * MiB, t=t0 + 1),
        entry("segment_alloc", s3, 14 * MiB, t=t0 + 2),
        entry("alloc", s3, 14 * MiB, t=t0 + 3),
        entry("free_requested", s2, 1000, t=t0 + 4),
        entry("free_completed", s2, 1000, t=t0 + 5),
        entry("free_requested", s1 + 3 * MiB, 5 * MiB, t=t0 + 6),
        entry("free_completed", s1 + 3 * MiB, 5 * MiB, t=t0 + 7),
        {"action": "oom", "device_free": 123456789, "size": 100 << 30, "stream": 0, "time_us": t0 + 8,
         "frames": FRAMES},
        entry("snapshot", 0, 17 * MiB + 512, t=t0 + 9, frames=False),
    ]
    dev1 = [
        entry("segment_alloc", d1, 2 * MiB, t=t0 + 10),
        entry("alloc", d1, 512, t=t0 + 11),
        entry("free_requested", d1, 512, t=t0 + 12),
        entry("free_completed", d1, 512, t=t0 + 13),
    ]
    segments = [
        segment(0, s1, [block(3 * MiB, "active_allocated"), block(17 * MiB, "inactive", 0)]),
        segment(0, s2, [block(2 * MiB, "inactive", 0)], small=True),
        segment(0, s3, [block(14 * MiB, "active_allocated")]),
        segment(1, d1, [block(2 * MiB, "inactive", 0)], small=True),
    ]
    return segments, [dev0, dev1], conf


def expandable_basic(conf):
    x, y = 0x7F0000000000, 0x7F4000000000
    t0 = 1_700_000_000_000_000
    dev0 = [
        entry("segment_map", x, 20 * MiB, t=t0 + 1),
        entry("alloc", x, 5 * MiB, t=t0 + 2),
        entry("segment_map", x + 20 * MiB, 20 * MiB, t=t0 + 3),
        entry("alloc", x + 5 * MiB, 30 * MiB, t=t0 + 4),
        entry("free_requested", x, 5 * MiB, t=t0 + 5),
        entry("free_completed", x, 5 * MiB, t=t0 + 6),
        entry("segment_map", y, 2 * MiB, t=t0 + 7),
        entry("alloc", y, 1000, t=t0 + 8),
        entry("free_requested", x + 5 * MiB, 30 * MiB, t=t0 + 9),
        entry("free_completed", x + 5 * MiB, 30 * MiB, t=t0 + 10),
        entry("alloc", x, 12 * MiB, t=t0 + 11),
    ]
    segments = [
        segment(0, x, [block(12 * MiB, "active_allocated"), block(28 * MiB, "inactive", 0)], expandable=True),
        segment(0, y, [block(1024, "active_allocated", 1000), block(2 * MiB - 1024, "inactive", 0)], small=True,
                expandable=True),
    ]
    return segments, [dev0], conf


def rounded(n):
    return max(512, (n + 511) // 512 * 512)


def random_workload(events, seed, conf):
    rng = random.Random(seed)
    next_addr = [0x7F0000000000]

    def fresh(size):
        a = next_addr[0]
        next_addr[0] += (rounded(size) + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
        return a

    t = [1_700_000_000_000_000]

    def tick():
        t[0] += 1
        return t[0]

    trace = []
    weights = [(fresh(s), s) for s in (rng.choice([4, 16, 64, 96]) * MiB + rng.randrange(0, 4096) for _ in range(24))]
    # Weights were allocated before recording; a few of them are freed during it.
    freed_weights = set(rng.sample(range(len(weights)), 3))
    steps = 0
    while len(trace) < events:
        seq = rng.randrange(16, 2048)
        live = []
        for layer in range(rng.randrange(4, 12)):
            size = seq * rng.choice([256, 1024, 4096]) + rng.randrange(0, 512)
            a = fresh(size)
            trace.append(entry("alloc", a, size, t=tick(), frames=layer == 0))
            live.append((a, size))
            if len(live) > 3:  # activations die a few layers later
                fa, fs = live.pop(0)
                trace.append(entry("free_requested", fa, fs, t=tick(), frames=False))
                trace.append(entry("free_completed", fa, fs, t=tick(), frames=False))
        for fa, fs in live:
            trace.append(entry("free_requested", fa, fs, t=tick(), frames=False))
            trace.append(entry("free_completed", fa, fs, t=tick(), frames=False))
        if steps == 2:
            for i in sorted(freed_weights):
                a, s = weights[i]
                trace.append(entry("free_requested", a, s, t=tick(), frames=False))
                trace.append(entry("free_completed", a, s, t=tick(), frames=False))
        steps += 1
    segments = [segment(0, a, [block(rounded(s), "active_allocated", s)]) for i, (a, s) in enumerate(weights)
                if i not in freed_weights]
    return segments, [trace], conf


def main(argv=None):
    ap = argparse.ArgumentParser(description="write a synthetic PyTorch memory snapshot pickle")
    ap.add_argument("out")
    ap.add_argument("--scenario", choices=["basic", "random", "expandable"], default="basic")
    ap.add_argument("--events", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--conf", default="", help="allocator_settings PYTORCH_CUDA_ALLOC_CONF to record")
    args = ap.parse_args(argv)
    if args.scenario == "basic":
        segments, traces, conf = basic(args.conf)
    elif args.scenario == "expandable":
        segments, traces, conf = expandable_basic(args.conf)
    else:
        segments, traces, conf = random_workload(args.events, args.seed, args.conf)
    snap = {
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": args.scenario == "expandable", "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
        },
    }
    with open(args.out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
