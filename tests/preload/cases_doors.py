# SPDX-License-Identifier: MIT
"""Preload cases about the ways in: dlsym and RTLD_NEXT/RTLD_DEFAULT lookups, every hook through
every door, cudaGetDriverEntryPoint*, a library constructor that allocates before ours, frames
of a plugin unloaded by dlclose."""
import os

from case_common import (MIB, Checker, run_prog, both, both_ran, check_stats)


def case_dlsym_lookup(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: rtld_next (a -> b, not a -> a)" % r.label, r.val("rtld_next"), 11)
        c.eq("%s: RTLD_DEFAULT from an RTLD_LOCAL library" % r.label, r.val("rtld_default_local_found"), 1)
    c.eq("plain: sim cuMemAlloc_v2 ok", plain.sim_ok("cuMemAlloc_v2"), 3)
    # 1024 + 1048576 + 2048 bytes, all small: one 2 MiB segment.
    c.eq("preload: sim cuMemAlloc_v2 ok", pre.sim_ok("cuMemAlloc_v2"), 1)
    rep = pre.report()
    check_stats(c, rep, {
        "allocation.all.allocated": 3,
        "allocation.all.freed": 3,
        "segment.all.allocated": 1,
        "num_device_alloc": 1,
        "allocated_bytes.all.allocated": 1024 + MIB + 2048,
    })
    doors = (rep or {}).get("doors", {})
    c.ge("doors.dlsym_substitutions (cuMemAlloc_v2, cuMemFree_v2, cuGetProcAddress)",
         doors.get("dlsym_substitutions"), 3)
    c.ge("doors.proc_address_substitutions", doors.get("proc_address_substitutions"), 1)
    return c.finish([plain, pre])


def case_hook_doors(args, tmp):
    # Every HOOK of src/core/driver_functions.hpp through every door. Without the preload the
    # simulated driver answers each (base name, ABI, flavour) with the function of that exported
    # name: the list's ABI versions and names agree with the driver's own table. With it, each
    # door hands out our hook.
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    hooks = plain.val("hooks")
    c.ge("hooks in the list", hooks, 1)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
        c.eq("%s: hooks" % r.label, r.val("hooks"), hooks)
        for door in ("by_handle", "by_proc_address", "by_proc_address4"):
            c.eq("%s: %s is the exported function" % (r.label, door), r.val(door), hooks)
    c.eq("plain: none in the preload library", plain.val("in_preload"), 0)
    c.eq("preload: every exported name binds to our hook", pre.val("in_preload"), hooks)
    return c.finish([plain, pre])


def case_dlclose_reuse(args, tmp):
    """A leak made by an unloaded plugin is not named after the plugin later loaded at its address."""
    c = Checker(args.case)
    d = os.path.dirname(os.path.abspath(args.prog))
    argv = (os.path.join(d, "libdlplug_a.so"), os.path.join(d, "libdlplug_b.so"))
    plain = run_prog(args, tmp, "plain", False, argv=argv)
    pre = run_prog(args, tmp, "preload", True, argv=argv)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
    c.eq("preload: plugin B was loaded at plugin A's old address (the case under test)", pre.val("same_base"), 1)
    rep = pre.report() or {}
    leaked = [s for s in rep.get("sites", []) if s["live_bytes"] > 0]
    c.eq("one leak: the 7 MiB block", [s["live_bytes"] for s in leaked], [7 * MIB])
    frames = leaked[0]["frames"] if leaked else []
    names = " ".join("%s %s %s" % (f.get("function"), f.get("file"), f.get("module")) for f in frames)
    c.true("no frame of the leak names plugin B", "plugin_b" not in names and "dlplug_b" not in names, frames[-3:])
    c.true("a frame of the leak names plugin A's module or says it is unknown",
           "libdlplug_a.so" in names, frames[-3:])
    return c.finish([plain, pre])

def case_early_ctor(args, tmp):
    c = Checker(args.case)
    plain = run_prog(args, tmp, "plain", False)
    # LD_DEBUG=libs: the dynamic loader also names each constructor it runs ("calling init:"), in
    # order, on stderr.
    pre = run_prog(args, tmp, "preload", True, {"LD_DEBUG": "libs"})
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
        c.eq("%s: cudaMalloc+cudaFree in the constructor" % r.label, r.val("ctor_cudart"), 0)
        c.eq("%s: dlsym'd cuMemAlloc_v2+cuMemFree_v2 in the constructor" % r.label, r.val("ctor_driver"), 0)
        c.eq("%s: main's 100 blocks held their data" % r.label, r.val("main_bad"), 0)
        c.eq("%s: the worker's 100 blocks held their data" % r.label, r.val("worker_bad"), 0)
    inits = [l.split("calling init:", 1)[1].strip() for l in pre.stderr.splitlines() if "calling init:" in l]
    ctor_at = [i for i, path in enumerate(inits) if "libearly_ctor_lib.so" in path]
    prof_at = [i for i, path in enumerate(inits) if "libgpumemprof.so" in path]
    c.true("loader ran libearly_ctor_lib's constructor before libgpumemprof's",
           ctor_at and prof_at and ctor_at[0] < prof_at[0], inits)
    # Program allocations: constructor 1000 B + 3 MiB, worker 100 x 4096, main 100 x 8192 = 202.
    c.eq("plain: sim cuMemAlloc_v2 ok (every allocation)", plain.sim_ok("cuMemAlloc_v2"), 202)
    # Pool: 1000 -> 1024 opens a 2 MiB small segment; 3 MiB opens a 20 MiB large one. Every later
    # block is small, and all of them together (1024 + 100*4096 + 100*8192 = 1229824 bytes) fit in
    # the 2 MiB segment even if none were reused: 2 device allocations whatever the interleaving.
    c.eq("preload: sim cuMemAlloc_v2 ok (segments)", pre.sim_ok("cuMemAlloc_v2"), 2)
    rep = pre.report()
    # bytes: 1024 + 3145728 + 100*4096 + 100*8192 = 4375552; requested: 1000 + 3145728 + 409600 +
    # 819200 = 4375528.
    check_stats(c, rep, {
        "allocation.all.allocated": 202,
        "allocation.all.freed": 202,
        "allocation.all.current": 0,
        "allocated_bytes.all.allocated": 4375552,
        "requested_bytes.all.allocated": 4375528,
        "segment.all.allocated": 2,
        "num_device_alloc": 2,
        "reserved_bytes.all.current": 22 * MIB,
    })
    doors = (rep or {}).get("doors", {})
    c.ge("doors.dlsym_substitutions (cuMemAlloc_v2, cuMemFree_v2 from the constructor)",
         doors.get("dlsym_substitutions"), 2)
    return c.finish([plain, pre])


def case_entry_point(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: cudaGetDriverEntryPointByVersion status" % r.label, r.val("alloc_status"), 0)
        c.eq("%s: cudaGetDriverEntryPoint status" % r.label, r.val("free_status"), 0)
    c.eq("plain: sim cuMemAlloc_v2 ok", plain.sim_ok("cuMemAlloc_v2"), 4)
    c.eq("plain: sim cuMemFree_v2 ok", plain.sim_ok("cuMemFree_v2"), 4)
    # Through the pool: a (3 MiB) opens a 20 MiB large segment, b (17 MiB) takes exactly its rest,
    # d (1000 -> 1024) opens a 2 MiB small segment. a is freed; once the device is idle, c (3 MiB)
    # finds no free large block, retires the free's fence and gets a's block.
    c.eq("preload: c (3 MiB) is a's block again", pre.val("c_reuses_a"), 1)
    c.eq("preload: sim cuMemAlloc_v2 ok (segments only)", pre.sim_ok("cuMemAlloc_v2"), 2)
    c.eq("preload: sim cuMemFree_v2 calls", pre.sim_calls("cuMemFree_v2"), 0)
    rep = pre.report()
    # bytes 3145728 + 17825792 + 1024 + 3145728 = 24118272; requested 1000 instead of 1024: 24118248.
    check_stats(c, rep, {
        "allocation.all.allocated": 4,
        "allocation.all.freed": 4,
        "segment.all.allocated": 2,
        "num_device_alloc": 2,
        "allocated_bytes.all.allocated": 24118272,
        "requested_bytes.all.allocated": 24118248,
        "allocated_bytes.all.peak": 3145728 + 17825792 + 1024,
        "reserved_bytes.all.current": 22 * MIB,
    })
    c.ge("doors.proc_address_substitutions", (rep or {}).get("doors", {}).get("proc_address_substitutions"), 1)
    return c.finish([plain, pre])
