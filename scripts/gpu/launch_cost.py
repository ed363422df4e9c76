#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the preload's launch hooks cost a kernel launch on a real GPU: launch_cost.cu built with
the shared and the static runtime, run without and with LD_PRELOAD alternating (--rounds), the
median host time per launch of each and the difference. Writes --out (JSON)."""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=200000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="launch-")
    result = {}
    for rt in ("shared", "static"):
        exe = os.path.join(tmp, "launch_cost_" + rt)
        p = subprocess.run(["nvcc", "-O2", "-arch=sm_90", "-cudart=" + rt, os.path.join(HERE, "launch_cost.cu"),
                            "-o", exe], capture_output=True, text=True)
        if p.returncode != 0:
            result[rt] = {"build_error": p.stderr[-800:]}
            continue
        runs = {"plain": [], "preload": []}
        measured = []
        for r in range(a.rounds):
            for mode in (("plain", "preload") if r % 2 == 0 else ("preload", "plain")):
                env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_") and k != "LD_PRELOAD"}
                if mode == "preload":
                    env["LD_PRELOAD"] = os.path.abspath(a.lib)
                    env["GPUMEMPROF_OUTPUT"] = os.path.join(tmp, "r-%p")
                q = subprocess.run([exe, str(a.launches)], env=env, capture_output=True, text=True, timeout=300)
                line = [l for l in q.stdout.splitlines() if l.startswith("{")]
                if q.returncode == 0 and line:
                    runs[mode].append(json.loads(line[-1])["ns_per_launch"])
        for f in glob.glob(os.path.join(tmp, "r-*.json")):
            for d in json.load(open(f)).get("devices", []):
                measured.append(d.get("device_accounting", {}).get("driver_calls_measured"))
            os.remove(f)
        med = {m: statistics.median(v) if v else None for m, v in runs.items()}
        result[rt] = {"ns_per_launch": runs, "median": med, "driver_calls_measured": measured,
                      "added_ns": round(med["preload"] - med["plain"], 1) if all(med.values()) else None}
        print(rt, json.dumps(result[rt]), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    json.dump(result, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
