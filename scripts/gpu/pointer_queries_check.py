#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Pointer queries on the real driver, without and with the preload: cuMemGetAddressRange,
cuPointerGetAttribute(RANGE_START_ADDR / RANGE_SIZE / MEMORY_TYPE) and cuPointerGetAttributes on
live, interior and freed pointers of plain cuMemAlloc blocks (libcuda through ctypes, no
framework). With the preload the blocks come from the pool; every answer must be the driver's
own answer without it (the freed pointer's error codes above all, which the library takes from
the driver for memory it does not know).

  python3 scripts/gpu/pointer_queries_check.py --lib build/src/libgpumemprof.so --out p.json
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

RANGE_START, RANGE_SIZE, MEMORY_TYPE, DEVICE_ORDINAL = 11, 12, 2, 9  # CUpointer_attribute values


def child():
    cu = ctypes.CDLL("libcuda.so.1")
    ptr, size = ctypes.c_uint64, ctypes.c_size_t
    ok = lambda r, what: r == 0 or sys.exit("%s failed: %d" % (what, r))  # noqa: E731
    ok(cu.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
    ok(cu.cuCtxSetCurrent(ctx), "set current")
    blocks = {}
    for name, n in (("a", 1000), ("b", 3000), ("c", 3 << 20)):
        p = ptr()
        ok(cu.cuMemAlloc_v2(ctypes.byref(p), size(n)), "cuMemAlloc")
        blocks[name] = p.value
    out = {}

    def query(label, p, base_of):
        base, length = ptr(), size()
        r = cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(length), ptr(p))
        out[label + ".range"] = [r, base.value - base_of if r == 0 else None, length.value if r == 0 else None]
        start, sz, mt = ptr(), size(), ctypes.c_uint()
        r = cu.cuPointerGetAttribute(ctypes.byref(start), RANGE_START, ptr(p))
        out[label + ".start"] = [r, start.value - base_of if r == 0 else None]
        out[label + ".size"] = [cu.cuPointerGetAttribute(ctypes.byref(sz), RANGE_SIZE, ptr(p)), sz.value]
        out[label + ".type"] = [cu.cuPointerGetAttribute(ctypes.byref(mt), MEMORY_TYPE, ptr(p)), mt.value]
        attrs = (ctypes.c_int * 3)(MEMORY_TYPE, RANGE_SIZE, DEVICE_ORDINAL)
        t, s, o = ctypes.c_uint(7), size(7), ctypes.c_int(7)
        data = (ctypes.c_void_p * 3)(ctypes.addressof(t), ctypes.addressof(s), ctypes.addressof(o))
        out[label + ".attrs"] = [cu.cuPointerGetAttributes(3, attrs, data, ptr(p)), t.value, s.value, o.value]

    query("b.interior", blocks["b"] + 100, blocks["b"])
    query("c.interior", blocks["c"] + (1 << 20), blocks["c"])
    ok(cu.cuMemFree_v2(ptr(blocks["b"])), "cuMemFree")
    query("b.freed", blocks["b"], blocks["b"])  # error codes, and what is written for unknown memory
    for name in ("a", "c"):
        ok(cu.cuMemFree_v2(ptr(blocks[name])), "cuMemFree")
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default="pointer-queries.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child()
    runs = {}
    for label, preload in (("plain", None), ("preload", os.path.abspath(a.lib))):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_") and k != "LD_PRELOAD"}
        env["GPUMEMPROF_OUTPUT"] = "none"
        if preload:
            env["LD_PRELOAD"] = preload
        p = subprocess.run([sys.executable, __file__, "--lib", a.lib, "--child"], env=env, capture_output=True,
                           text=True, timeout=120)
        try:
            runs[label] = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            runs[label] = {"error": p.stderr[-800:]}
    differ = {k: [v, runs["preload"].get(k)] for k, v in runs["plain"].items() if runs["preload"].get(k) != v}
    result = [{"check": "pointer queries answer as without the preload", "pass": not differ and "error" not in
               runs["plain"], "differ": differ, "plain": runs["plain"]}]
    json.dump(result, open(a.out, "w"), indent=1)
    print(json.dumps(result, indent=1))
    return 0 if result[0]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
