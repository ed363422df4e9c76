# SPDX-License-Identifier: MIT
"""Preload cases of prog_contexts (contexts and what lives in them), run by run_case.py: each runs
the program without and with LD_PRELOAD=libgpumemprof.so on the simulated driver and checks the
exit JSON against values computed by hand."""
from case_common import MIB, Checker, run_prog


def both_ran(c, args, tmp, argv, extra_env=None):
    runs = (run_prog(args, tmp, "plain", False, extra_env, argv), run_prog(args, tmp, "preload", True, extra_env, argv))
    for r in runs:
        c.eq("%s: exit code" % r.label, r.rc, 0)
    return runs


def entries(rep, device=0):
    return [d for d in (rep or {}).get("devices", []) if d.get("device") == device]


def case_contexts_many(args, tmp):
    """70 contexts live at once, context i leaking 4096 * (i + 1) bytes: every one is observed."""
    c = Checker(args.case)
    n = 70
    plain, pre = both_ran(c, args, tmp, ["many", str(n)])
    c.eq("plain: contexts made", plain.val("contexts"), n)
    rep = pre.report() or {}
    devs = entries(rep)
    c.eq("preload: device 0 entries (one pool per context)", len(devs), n)
    c.eq("preload: of which alive at exit", sum(1 for d in devs if d.get("context_alive")), n)
    # 4096 * (1 + 2 + ... + 70) = 4096 * 2485
    c.eq("preload: leaks at exit (bytes)", (rep.get("leaks") or {}).get("bytes"), 10178560)
    c.eq("preload: leaks at exit (blocks)", (rep.get("leaks") or {}).get("count"), n)
    held = sorted(d.get("memory_stats", {}).get("allocated_bytes.all.current", -1) for d in devs)
    c.eq("preload: allocated_bytes.all.current of the pools", held, [4096 * (i + 1) for i in range(n)])
    return c.finish([plain, pre])


KEPT_DEAD = 16  # PoolTable's destroyed contexts kept in full for the report


def case_context_cycles(args, tmp):
    """300 create/use/destroy cycles: the report keeps the latest destroyed contexts in full and
    folds the older ones into one entry, so it stays the same size however long the run."""
    c = Checker(args.case)
    n = 300
    plain, pre = both_ran(c, args, tmp, ["cycles", str(n)])
    rep = pre.report() or {}
    devs = entries(rep)
    folded = [d for d in devs if d.get("folded_contexts")]
    full = [d for d in devs if not d.get("folded_contexts")]
    c.eq("preload: destroyed contexts kept in full", len(full), KEPT_DEAD)
    c.eq("preload: entries folding the older ones", len(folded), 1)
    c.eq("preload: none alive", sum(1 for d in devs if d.get("context_alive")), 0)
    if folded:
        f = folded[0]
        k = n - KEPT_DEAD
        c.eq("folded: contexts", f.get("folded_contexts"), k)
        st = f.get("memory_stats", {})
        # Each context: one 1 MiB block (small pool, rounded to 1 MiB) in one 2 MiB segment, freed;
        # the segment dropped with the context. Sums of the counts, the largest of the peaks.
        for key, want in [("allocation.all.allocated", k), ("allocation.all.freed", k),
                          ("allocation.all.current", 0), ("allocation.all.peak", 1),
                          ("allocated_bytes.all.allocated", k * MIB), ("allocated_bytes.all.peak", MIB),
                          ("segment.all.allocated", k), ("segment.all.freed", k),
                          ("reserved_bytes.all.allocated", k * 2 * MIB), ("reserved_bytes.all.freed", k * 2 * MIB),
                          ("reserved_bytes.all.current", 0), ("reserved_bytes.all.peak", 2 * MIB),
                          # the segment went with its context: the pool never called cuMemFree
                          ("num_device_alloc", k), ("num_device_free", 0)]:
            c.eq("folded: %s" % key, st.get(key), want)
    for d in full:
        st = d.get("memory_stats", {})
        c.eq("context %s: allocation.all.allocated" % d.get("context"), st.get("allocation.all.allocated"), 1)
    c.eq("kept contexts are the latest (numbers)", sorted(d.get("context") for d in full),
         list(range(n - KEPT_DEAD, n)))
    c.eq("preload: leaks at exit (bytes)", (rep.get("leaks") or {}).get("bytes"), 0)
    return c.finish([plain, pre])


def passthrough_case(args, tmp, how):
    """200 stream-ordered blocks, 6 MiB managed and 1 MiB pooled, then the context goes and 200 new
    stream-ordered blocks are leaked: only those 200 are live at exit."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, ["passthrough", how])
    rep = pre.report() or {}
    block = 64 * 1024
    c.eq("preload: leaks at exit (blocks): the 200 made after the context went",
         (rep.get("leaks") or {}).get("count"), 200)
    c.eq("preload: leaks at exit (bytes)", (rep.get("leaks") or {}).get("bytes"), 200 * block)
    pts = [d.get("passthrough", {}) for d in rep.get("devices", []) + rep.get("devices_without_pool", [])
           if d.get("device") == 0]
    async_current = sum(p.get("async", {}).get("current_bytes", 0) for p in pts)
    managed_current = sum(p.get("managed", {}).get("current_bytes", 0) for p in pts)
    c.eq("preload: passthrough async current_bytes", async_current, 200 * block)
    c.eq("preload: passthrough managed current_bytes", managed_current, 0)
    c.eq("preload: passthrough async calls", sum(p.get("async", {}).get("calls", 0) for p in pts), 400)
    # The 200 the driver freed with the context count as freed: calls - frees = live.
    c.eq("preload: passthrough async frees", sum(p.get("async", {}).get("frees", 0) for p in pts), 200)
    c.eq("preload: passthrough managed frees", sum(p.get("managed", {}).get("frees", 0) for p in pts), 1)
    return c.finish([plain, pre])


def case_reset_passthrough(args, tmp):
    return passthrough_case(args, tmp, "reset")


def case_destroy_passthrough(args, tmp):
    return passthrough_case(args, tmp, "destroy")


def case_pointer_queries(args, tmp):
    """Pointer queries on pooled blocks answer as the driver does for plain cudaMalloc blocks."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, ["pointer_queries"])
    want = {
        # live blocks: the block's own base and size (b: 3000 bytes, c: 3 MiB), from interior pointers
        "range_b_interior": 0, "range_b_base_is_b": 1, "range_b_size": 3000,
        "range_c_interior": 0, "range_c_base_is_c": 1, "range_c_size": 3 * MIB,
        "attr_start_b": 0, "attr_start_b_is_b": 1, "attr_size_b": 0, "attr_size_b_value": 3000,
        "attr_type_b": 0, "attr_type_b_value": 2,  # CU_MEMORYTYPE_DEVICE
        "attrs_b": 0, "attrs_b_type": 2, "attrs_b_start_is_b": 1, "attrs_b_size": 3000, "attrs_b_ordinal": 0,
        "rt_attrs_b": 0, "rt_attrs_b_type": 2, "rt_attrs_b_device": 0, "rt_attrs_b_device_pointer_is_b": 1,
        # freed: CUDA_ERROR_NOT_FOUND (500) for the range, CUDA_ERROR_INVALID_VALUE (1) for one
        # attribute, the list of attributes succeeds with "not a CUDA pointer" values, and the
        # runtime says unregistered memory (cudaMemoryTypeUnregistered = 0)
        "freed_range": 500, "freed_attr_start": 1,
        "freed_attrs": 0, "freed_attrs_type": 0, "freed_attrs_start": 7, "freed_attrs_size": 7,
        "freed_attrs_ordinal": -2,
        "freed_rt_attrs": 0, "freed_rt_attrs_type": 0,
        "range_d": 0, "range_d_base_is_d": 1, "range_d_size": 2000,
    }
    for r in (plain, pre):
        for k, v in want.items():
            c.eq("%s: %s" % (r.label, k), r.val(k), v)
    return c.finish([plain, pre])


CONTEXT_CASES = {
    "contexts_many": case_contexts_many,
    "context_cycles": case_context_cycles,
    "reset_passthrough": case_reset_passthrough,
    "destroy_passthrough": case_destroy_passthrough,
    "pointer_queries": case_pointer_queries,
}
