#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# What waiting for fences costs in reserved memory, on a real program's requests: a recording of
# the README's PyTorch loop with a live side stream on the H200 (bench/data/, 10 steps) is played
# back at its recorded host times (bench/trace_player.cpp) under the preload on the simulated
# device, whose events complete SIMCUDA_EVENT_DELAY_US after they are recorded:
#   at once: no stream is created, freed blocks are reused at once (PyTorch's own order);
#   fenced:  a non-blocking stream exists, freed blocks wait for fences that trail the host.
# Goal: the fenced reserved peak <= 1.10x the at-once peak, for each delay.
import argparse
import json
import glob
import lzma
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "harness"))
from preload_env import preload_env  # noqa: E402


def play(args, tmp, label, trace, extra, stream):
    env = preload_env(args.sim_dir, args.lib, output=os.path.join(tmp, label),
                      extra=dict({"GPUMEMPROF_STACK_DEPTH": "0", "GPUMEMPROF_HTML": "0", "SIMCUDA_CAPACITY": "141G"},
                                 **extra))
    p = subprocess.run([args.player, trace] + (["stream"] if stream else []), env=env, capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (label, p.returncode, p.stderr[-2000:]))
    with open(os.path.join(tmp, label + ".json")) as f:
        dev = json.load(f)["devices"][0]
    played = json.loads(p.stdout.strip().splitlines()[-1])
    return dev, played


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--player", required=True)
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--trace", default=os.path.join(os.path.dirname(__file__), "data", "torch-side-stream-h200.gmt.xz"))
    ap.add_argument("--delays-us", default="1000,4000")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="gpumemprof_fenced_") as tmp:
        trace = os.path.join(tmp, "trace.gmt")
        with lzma.open(args.trace) as src, open(trace, "wb") as dst:
            dst.write(src.read())
        base, _ = play(args, tmp, "at-once", trace, {}, False)
        base_res = base["memory_stats"]["reserved_bytes.all.peak"]
        print("at once: reserved peak %d B, %d device allocations" % (base_res, base["memory_stats"]["num_device_alloc"]))
        for delay in args.delays_us.split(","):
            dev, played = play(args, tmp, "fenced-" + delay, trace, {"SIMCUDA_EVENT_DELAY_US": delay}, True)
            ms, pc = dev["memory_stats"], dev["pool_counters"]
            ratio = ms["reserved_bytes.all.peak"] / base_res
            good = ratio <= 1.10
            ok = ok and good
            print("%s: device %5d us behind: reserved peak %d B = %.3fx at once (goal <= 1.10); %d device "
                  "allocations; fences %d, polls %d, waits %d (%.1f ms), pending peak %d B; player %.1f ms late at worst"
                  % ("PASS" if good else "FAIL", int(delay), ms["reserved_bytes.all.peak"], ratio,
                     ms["num_device_alloc"], pc["fences_recorded"], pc["fence_polls"], pc["fence_waits"],
                     pc["wait_ns"] / 1e6, dev["pending_free"]["bytes_peak"], played["worst_late_ms"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
