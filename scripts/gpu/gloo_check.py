#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two ranks on one GPU (issue: two GPUs, the part a single H200 allows): `torchrun
--nproc_per_node=2` DDP training over gloo, both ranks on device 0, without and with the preload.
Checked: the same losses, one report per rank (GPUMEMPROF_OUTPUT with %r) with its rank and
PyTorch's allocator attached, and `gpumemprof merge` of the two naming both ranks' peaks."""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = []


def record(name, ok, **numbers):
    RESULTS.append({"check": name, "pass": bool(ok), **numbers})
    print(("PASS " if ok else "FAIL ") + name + " " + json.dumps(numbers)[:700], flush=True)


def ddp(lib, out):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_") and k != "LD_PRELOAD"}
    env.update(DDP_BACKEND="gloo", DDP_ONE_DEVICE="1", GPUMEMPROF_OUTPUT=os.path.join(out, "rank-%r"))
    if lib:
        env["LD_PRELOAD"] = lib
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(HERE, "ddp_train.py"), "12"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return p.returncode, {l.get("rank"): l for l in lines}, p.stderr[-1500:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = tempfile.mkdtemp(prefix="gloo-")
    rc0, plain, err0 = ddp(None, out)
    shutil.rmtree(out)
    os.makedirs(out)
    rc1, pre, err1 = ddp(os.path.abspath(a.lib), out)
    record("gloo DDP: both runs end with 0", rc0 == rc1 == 0, plain=rc0, preload=rc1, stderr=(err1 or err0)[-1200:])
    record("gloo DDP: the same losses on each rank", sorted(plain) == [0, 1] and all(
        plain[r].get("losses") == pre.get(r, {}).get("losses") for r in plain),
        plain={r: plain[r].get("losses", [])[-2:] for r in plain}, preload={r: pre[r].get("losses", [])[-2:] for r in pre})
    files = sorted(glob.glob(os.path.join(out, "rank-*.json")))
    reps = [json.load(open(f)) for f in files]
    record("one report per rank, rank recorded, PyTorch's allocator attached",
           sorted(r.get("rank") for r in reps) == [0, 1] and all(
               any(d.get("allocator") == "pytorch" for d in r.get("devices", [])) for r in reps),
           files=[os.path.basename(f) for f in files], ranks=[r.get("rank") for r in reps])
    m = subprocess.run([a.cli, "merge", "--json"] + files, capture_output=True, text=True, timeout=120)
    try:
        merged = json.loads(m.stdout)
    except ValueError:
        merged = {}
    ranks = {r.get("rank"): r for r in merged.get("ranks", [])}
    record("gpumemprof merge names both ranks' peaks", m.returncode == 0 and sorted(ranks) == [0, 1] and all(
        ranks[r].get("peak_allocated", 0) > 0 for r in ranks),
        ranks={r: {k: ranks[r].get(k) for k in ("peak_allocated", "peak_reserved", "peak_time_s")} for r in ranks},
        largest=merged.get("largest"), stderr=m.stderr[-500:])
    shutil.rmtree(out, ignore_errors=True)
    with open(a.out, "w") as f:
        json.dump(RESULTS, f, indent=1)
    failed = [r for r in RESULTS if not r["pass"]]
    print("%d checks, %d failed" % (len(RESULTS), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
