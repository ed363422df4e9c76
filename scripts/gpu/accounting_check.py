#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GPU check of the device accounting (devices[i].device_accounting): the driver's used figure at
its peak and at exit split into buckets, with under 1% unexplained, for a JAX, a CuPy and an nvcc
program, each with and without a CUDA graph (JAX's: XLA's command buffers). PyTorch's are in attach_check.py.
Writes --out (JSON) and prints one line per check."""
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
KEEP = None  # --keep: a folder for the reports

CUPY = r'''
import sys, cupy as cp
a = cp.ones((64 << 20,), dtype=cp.float32)          # 256 MiB through CuPy's pool
b = cp.arange(1 << 24, dtype=cp.float32)
if sys.argv[1] == "graph":
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        c = a[: 1 << 24] * 2 + b
        g = s.end_capture()
    g.launch(s)
    s.synchronize()
print({"sum": float((a[: 1 << 20] + b[: 1 << 20]).sum())})
'''


def record(name, ok, **numbers):
    RESULTS.append({"check": name, "pass": bool(ok), **numbers})
    print(("PASS " if ok else "FAIL ") + name + " " + json.dumps(numbers)[:700], flush=True)


def run(name, cmd, lib, extra=None):
    out = tempfile.mkdtemp(prefix="acct-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_")}
    env.update(extra or {})
    env["LD_PRELOAD"] = lib
    env["GPUMEMPROF_OUTPUT"] = os.path.join(out, "r-%p")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    reports = [json.load(open(f)) for f in glob.glob(os.path.join(out, "r-*.json"))]
    if KEEP:
        for f in glob.glob(os.path.join(out, "r-*.json")) + glob.glob(os.path.join(out, "r-*.txt")):
            shutil.copy(f, os.path.join(KEEP, name.replace(" ", "_") + "-" + os.path.basename(f)))
    shutil.rmtree(out, ignore_errors=True)
    record(name + ": ran", p.returncode == 0 and bool(reports), rc=p.returncode, stderr=p.stderr[-800:])
    for rep in reports:
        for d in rep.get("devices", []):
            acc = d.get("device_accounting")
            if not acc:
                continue
            for when, m in (("peak", acc), ("exit", acc.get("at_exit") or {})):
                used, un = m.get("driver_used_bytes", 0), m.get("unexplained_bytes")
                record("%s: at the %s, unexplained < 1%% of used" % (name, when),
                       used > 0 and un is not None and abs(un) < 0.01 * used, used=used, unexplained=un,
                       share=round(un / used, 4) if used and un is not None else None, buckets=m.get("buckets"),
                       by_library=m.get("by_library"))
            return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bindir", default="/tmp/acct-bin")
    ap.add_argument("--keep", default=None, help="copy the reports (.json, .txt) here")
    ap.add_argument("--only", default=None, help="comma-separated: nvcc,cupy,jax")
    a = ap.parse_args()
    global KEEP
    KEEP = a.keep
    if KEEP:
        os.makedirs(KEEP, exist_ok=True)
    only = set((a.only or "nvcc,cupy,jax").split(","))
    lib = os.path.abspath(a.lib)
    os.makedirs(a.bindir, exist_ok=True)
    exe = os.path.join(a.bindir, "accounting_mix")
    if "nvcc" in only:
        p = subprocess.run(["nvcc", "-O2", "-arch=sm_90", "-cudart=shared", os.path.join(HERE, "accounting_mix.cu"),
                            "-o", exe, "-lcublas", "-lcuda"], capture_output=True, text=True)
        record("nvcc build", p.returncode == 0, stderr=p.stderr[-800:])
        if p.returncode == 0:
            run("nvcc mix", [exe], lib)
            run("nvcc mix with a graph", [exe, "graph"], lib)
    if "cupy" in only:
        run("cupy", [sys.executable, "-c", CUPY, "plain"], lib)
        run("cupy with a graph", [sys.executable, "-c", CUPY, "graph"], lib)
    if "jax" in only:
        probe = [sys.executable, os.path.join(HERE, "probe", "jax_probe.py"), "bfc"]
        # XLA's command buffers are CUDA graphs: off, and on for every kind with no minimum size.
        run("jax", probe, lib, {"XLA_FLAGS": "--xla_gpu_enable_command_buffer="})
        run("jax with a graph", probe, lib,
            {"XLA_FLAGS": "--xla_gpu_enable_command_buffer=FUSION,CUBLAS "
                          "--xla_gpu_graph_min_graph_size=1"})
    with open(a.out, "w") as f:
        json.dump(RESULTS, f, indent=1)
    failed = [r for r in RESULTS if not r["pass"]]
    print("%d checks, %d failed" % (len(RESULTS), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
