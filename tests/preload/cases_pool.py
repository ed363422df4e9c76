# SPDX-License-Identifier: MIT
"""Preload cases about the pool's numbers: the allocation sequence by hand (shared and static
cudart, driver calls), pass-through kinds, bad frees, OOM, cross-stream reuse, library streams,
free-memory queries, the pool off, bad settings, legacy IPC, a capture in progress,
cudaDeviceReset, expandable segments."""
import glob
import os
import shutil
import subprocess

from case_common import (MIB, Checker, report_text, device_entry, stat, model_stat, run_prog, both, both_ran, cli_replay,
                         check_stats, same_values, check_passthrough_kind)

# ---- expected numbers of prog_alloc_sequence, by hand (pytorch-allocator.md 1.2, 1.6, split rule) ----
# a = 1000 B -> round 1024, small pool: new 2 MiB segment #1, split (rest 2096128).
# b = 1 MiB  -> 1048576 <= kSmallSize: small pool, fits in the rest of #1 (rest 1047552).
# c = 3 MiB  -> 3145728, large pool: new 20 MiB segment #2 (1..10 MiB -> kLargeBuffer), split (17 MiB rest).
# d = 25 MiB -> 26214400, no free large block >= it: new segment #3 of 26 MiB (>= 10 MiB: round to
#               2 MiB = 27262976); rest 1048576 is not > kSmallSize, so NO split: the block is 27262976.
# free a; e = 700 B -> 1024: best fit is a's freed 1024-byte block (no new segment).
# free c (merges with its 17 MiB rest: #2 wholly free); f = 5 MiB -> 5242880 from #2, split (15 MiB rest).
# free b, d, e, f.
# allocated_bytes: 1024, +1048576, +3145728, +27262976 = 31458304, -1024, +1024, -3145728 = 28312576,
#   +5242880 = 33555456 (peak); cumulative = 1024+1048576+3145728+27262976+1024+5242880 = 36702208.
# large pool allocated bytes: 3145728, +27262976 = 30408704, -3145728, +5242880 = 32505856 (peak).
# requested_bytes cumulative = 1000+1048576+3145728+26214400+700+5242880 = 35653284.
# reserved: 2 MiB + 20 MiB + 26 MiB = 48 MiB = 50331648, never given back (no empty_cache).


SEQUENCE_STATS = {
    "allocation.all.allocated": 6,
    "allocation.all.freed": 6,
    "allocation.all.current": 0,
    "allocation.small_pool.allocated": 3,
    "allocation.large_pool.allocated": 3,
    "allocated_bytes.all.current": 0,
    "allocated_bytes.all.peak": 33555456,
    "allocated_bytes.all.allocated": 36702208,
    "allocated_bytes.large_pool.peak": 32505856,
    "requested_bytes.all.allocated": 35653284,
    "reserved_bytes.all.peak": 50331648,
    "reserved_bytes.all.current": 50331648,
    "segment.all.allocated": 3,
    "segment.small_pool.allocated": 1,
    "segment.large_pool.allocated": 2,
    "segment.all.current": 3,
    "num_device_alloc": 3,
    "num_device_free": 0,
    "num_ooms": 0,
    "num_alloc_retries": 0,
    "oversize_allocations.allocated": 0,
}


def case_sequence(args, tmp, static):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: program_mallocs" % r.label, r.val("program_mallocs"), 6)
    # Without the profiler every cudaMalloc/cudaFree reaches the (simulated) device.
    c.eq("plain: sim cuMemAlloc_v2 ok", plain.sim_ok("cuMemAlloc_v2"), 6)
    c.eq("plain: sim cuMemFree_v2 ok", plain.sim_ok("cuMemFree_v2"), 6)
    # With it, the device sees only the three segments and no free (the pool keeps them).
    c.eq("preload: sim cuMemAlloc_v2 ok", pre.sim_ok("cuMemAlloc_v2"), 3)
    c.eq("preload: sim cuMemFree_v2 calls", pre.sim_calls("cuMemFree_v2"), 0)
    rep = pre.report()
    c.true("preload: one JSON report", len(pre.reports) == 1, len(pre.reports))
    if rep:
        c.eq("pool", rep.get("pool"), "caching")
        c.eq("version", rep.get("version"), 2)  # 2: the frame table (docs/outputs.md)
        check_stats(c, rep, SEQUENCE_STATS)
        # Every free here is synchronised before the memory is asked for again, so PyTorch's
        # allocator (the model) makes exactly the pool's decisions.
        for key, value in SEQUENCE_STATS.items():
            c.eq("pytorch_model[%s]" % key, model_stat(rep, key), value)
        # Reserved bytes peak when d (25 MiB -> an unsplit 26 MiB block in its own segment) is
        # allocated. Then: allocated a 1024 + b 1 MiB + c 3 MiB + d 26 MiB = 31458304; free inside
        # split segments: 2 MiB - 1024 - 1 MiB = 1047552 (small) + 20 MiB - 3 MiB (large) = 18873344.
        moment = {"reserved": 50331648, "allocated": 31458304, "inactive_split_bytes": 18873344}
        dev = device_entry(rep, 0) or {}
        c.eq("at_reserved_peak", dev.get("at_reserved_peak"), moment)
        c.eq("pytorch_model.at_reserved_peak", dev.get("pytorch_model", {}).get("at_reserved_peak"), moment)
        if static:
            # Static cudart: dlsym(libcuda, "cuGetProcAddress_v2") and the cuGetProcAddress table
            # are the only ways in.
            doors = rep.get("doors", {})
            c.ge("doors.dlsym_substitutions", doors.get("dlsym_substitutions"), 1)
            c.ge("doors.proc_address_substitutions", doors.get("proc_address_substitutions"), 1)
    if static and shutil.which("readelf"):
        p = subprocess.run(["readelf", "-d", args.prog], capture_output=True, text=True)
        c.true("static program has no libcudart in DT_NEEDED", "libcudart" not in p.stdout)
    return c.finish([plain, pre])


def case_driver_direct(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    # pitch: 1000-byte rows rounded to 512 -> 1024, the same with and without the pool.
    c.eq("plain: pitch", plain.val("pitch"), 1024)
    same_values(c, plain, pre, ["pitch", "program_mallocs"])
    c.eq("plain: sim cuMemAlloc_v2 ok", plain.sim_ok("cuMemAlloc_v2"), 2)
    c.eq("plain: sim cuMemAllocPitch_v2 ok", plain.sim_ok("cuMemAllocPitch_v2"), 1)
    # 1000 -> 1024 (2 MiB small segment), 3 MiB (20 MiB segment), pitch 1024*3 = 3072 (small pool,
    # fits in the first segment): 2 segments; bytes 1024+3145728+3072 = 3149824;
    # requested 1000+3145728+3072 = 3149800.
    c.eq("preload: sim cuMemAlloc_v2 ok", pre.sim_ok("cuMemAlloc_v2"), 2)
    c.eq("preload: sim cuMemAllocPitch_v2 calls", pre.sim_calls("cuMemAllocPitch_v2"), 0)
    check_stats(c, pre.report(), {
        "allocation.all.allocated": 3,
        "allocation.all.freed": 3,
        "segment.all.allocated": 2,
        "num_device_alloc": 2,
        "allocated_bytes.all.allocated": 3149824,
        "requested_bytes.all.allocated": 3149800,
        "reserved_bytes.all.current": 2 * MIB + 20 * MIB,
    })
    return c.finish([plain, pre])


def accounting_split(m):
    """An accounting reading as (the driver's used MiB, {bucket: MiB}, unexplained bytes)."""
    return (m.get("driver_used_bytes", 0) // MIB, {k: v // MIB for k, v in m.get("buckets", {}).items()},
            m.get("unexplained_bytes"))


def case_driver_footprint(args, tmp):
    """What the driver takes inside calls that allocate nothing, bucket by bucket (the simulated
    driver charges what prog_driver_footprint.cpp's module images say)."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, {"SIMCUDA_STREAM_BYTES": str(2 * MIB)})
    # Module A's 4 MiB before the first allocation; then a's code 2 + local memory 8, B's code 6,
    # the library's 2 + 2 (40 MiB with the 16 MiB block); C's code 2 at its lookup and its
    # function's 2 at its first launch, in a capture; a stream of 2 MiB (another made and
    # destroyed); two graphs of 2 MiB, one destroyed; the 8 MiB heap (56 MiB); B's 6 MiB unloaded
    # and the block freed.
    same_values(c, plain, pre, ["used_before_first_alloc_mib"])
    c.eq("plain: the driver's used figure (MiB)", [plain.val(k) for k in (
        "used_before_first_alloc_mib", "used_after_kernels_mib", "used_at_exit_mib")], [4, 40, 34])
    # Under the preload the pool keeps the 16 MiB segment cached at exit, and the block's free,
    # fenced once the program made a stream, made the profiler's own join stream (2 MiB).
    c.eq("preload: the driver's used figure (MiB)", [pre.val(k) for k in (
        "used_before_first_alloc_mib", "used_after_kernels_mib", "used_at_exit_mib")], [4, 40, 52])
    dev = pre.report()["devices"][0]
    acc = dev.get("device_accounting", {})
    ex = acc.get("at_exit", {})
    code = "the driver: modules and kernels loaded after the first allocation, local memory"
    graphs = "the driver: CUDA graphs (executables, memory nodes)"
    captures = "the driver: taken during stream captures (kernels first launched there, its bookkeeping)"
    limits = "the driver: context limits (malloc heap, printf FIFO, stack)"
    streams = "the driver: streams"
    base = "context and modules loaded before the first allocation"
    c.eq("at exit: the driver's used figure split (MiB)", accounting_split(ex),
         (52, {base: 4, "gpumemprof's pool: cached, free": 16, code: 16, captures: 2, streams: 2, graphs: 2,
               limits: 8, "gpumemprof's own stream (the pool's fences)": 2}, 0))
    c.eq("at the peak (B loaded, the block live): the split (MiB)", accounting_split(acc),
         (56, {base: 4, "gpumemprof's pool: allocated": 16, code: 22, captures: 2, streams: 2, graphs: 2,
               limits: 8}, 0))
    # Measured: a's lookup is before the baseline; a's first launch, B's load, lookup and launch,
    # the library's load, kernel lookup and launch, C's load and lookup, three stream calls, the
    # capture, two instantiations, e1's first launch, the destroy, the limit and the unload (a's
    # second launch and the launches in the capture are not).
    c.eq("driver calls measured", acc.get("driver_calls_measured"), 19)
    txt = report_text(pre)
    c.true(".txt: the driver's own buckets", graphs in txt and code in txt and captures in txt,
           txt[txt.find("device memory"):][:1500])
    return c.finish([plain, pre])


def case_driver_footprint_context(args, tmp):
    """A context the program creates beside the primary one takes its own memory (8 MiB here):
    named while it lives, gone from the split with it, and its destroy leaves the primary
    context's own buckets (a stream of 2 MiB) as they were."""
    c = Checker(args.case)
    env = {"SIMCUDA_STREAM_BYTES": str(2 * MIB), "SIMCUDA_CONTEXT_BYTES": str(8 * MIB)}
    plain, pre = both_ran(c, args, tmp, env, ["context"])
    same_values(c, plain, pre, ["used_with_context_mib", "used_after_destroy_mib", "primary_current_again"])
    # The 16 MiB block, the 2 MiB stream, the 8 MiB context and the 12 MiB block in it.
    c.eq("plain: the driver's used figure (MiB)", [plain.val(k) for k in (
        "used_with_context_mib", "used_after_destroy_mib", "used_at_exit_mib")], [38, 18, 2])
    # Under the preload the pool keeps the 16 MiB segment cached at exit, and the free after the
    # program made a stream made the profiler's own join stream (2 MiB).
    c.eq("preload: used at exit (MiB)", pre.val("used_at_exit_mib"), 20)
    acc = pre.report()["devices"][0].get("device_accounting", {})
    contexts = "the driver: contexts the program created"
    streams = "the driver: streams"
    c.eq("at the peak (the created context live): the split (MiB)", accounting_split(acc),
         (38, {"gpumemprof's pool: allocated": 28, streams: 2, contexts: 8}, 0))
    c.eq("at exit: the split (MiB)", accounting_split(acc.get("at_exit", {})),
         (20, {"gpumemprof's pool: cached, free": 16, streams: 2, "gpumemprof's own stream (the pool's fences)": 2}, 0))
    c.eq("no managed memory: managed_used", acc.get("managed_used"), False)
    txt = report_text(pre)
    c.true(".txt: the contexts bucket", contexts in txt, txt[txt.find("device memory"):][:1500])
    return c.finish([plain, pre])


def case_driver_footprint_graph_memory(args, tmp):
    """A graph's memory nodes: mapped at its first launch (32 MiB here, beside its executable's
    2 MiB), kept after the executable goes, given back by cuDeviceGraphMemTrim. The graphs'
    bucket follows the driver's figure through all three."""
    c = Checker(args.case)
    env = {"SIMCUDA_GRAPH_MEM_BYTES": str(32 * MIB)}
    plain, pre = both_ran(c, args, tmp, env, ["graph_memory"])
    keys = ("used_launched_mib", "used_after_destroy_mib", "used_after_trim_mib")
    same_values(c, plain, pre, keys)
    c.eq("plain: the driver's used figure (MiB)", [plain.val(k) for k in keys], [50, 48, 16])
    acc = pre.report()["devices"][0].get("device_accounting", {})
    graphs = "the driver: CUDA graphs (executables, memory nodes)"
    c.eq("at the peak (launched): the split (MiB)", accounting_split(acc),
         (50, {"gpumemprof's pool: allocated": 16, graphs: 34}, 0))
    c.eq("at exit (trimmed, the block freed): the split (MiB)", accounting_split(acc.get("at_exit", {})),
         (16, {"gpumemprof's pool: cached, free": 16}, 0))
    return c.finish([plain, pre])


def case_driver_footprint_async_pool(args, tmp):
    """Stream-ordered memory a pool keeps after its frees (release threshold 64 MiB, as PyTorch's
    cudaMallocAsync backend sets it): the driver's figure stays up, and the split names the
    pool's reserve instead of leaving it unexplained."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, {}, ["async_pool"])
    keys = ("used_live_mib", "used_after_free_mib", "used_after_small_mib", "pool_reserved_mib")
    same_values(c, plain, pre, keys)
    c.eq("plain: the driver's used figure and the pool's reserve (MiB)", [plain.val(k) for k in keys], [40, 40, 40, 24])
    c.eq("plain: used at exit (MiB)", plain.val("used_at_exit_mib"), 24)
    acc = pre.report()["devices"][0].get("device_accounting", {})
    live = "stream-ordered (cudaMallocAsync, memory pools)"
    kept = "stream-ordered memory pools: reserved, free (below their release threshold)"
    c.eq("at the peak (both live): the split (MiB)", accounting_split(acc),
         (40, {"gpumemprof's pool: allocated": 16, live: 24}, 0))
    # The pool keeps the 16 MiB segment cached, the driver's pool the 24 MiB.
    c.eq("at exit (both freed): the split (MiB)", accounting_split(acc.get("at_exit", {})),
         (40, {"gpumemprof's pool: cached, free": 16, kept: 24}, 0))
    # The 2000 small blocks move the figures by 64 KiB: no reading is due for them (a reading
    # asks the driver; each allocation took one, 2003 in all, while the pool's reserve was
    # compared with a total that left it out: 4-10 us a CuPy allocation on an H100).
    readings = acc.get("readings", 0)
    c.true("readings taken (the small blocks take none)", 0 < readings <= 8, readings)
    added = {n: pre.sim_calls(n) - plain.sim_calls(n) for n in ("cuMemGetInfo_v2", "cuMemPoolGetAttribute")}
    c.true("driver calls of the preload's own, whole run (not one a block)", max(added.values()) <= 40, added)
    return c.finish([plain, pre])


def case_driver_footprint_race(args, tmp):
    """A kernel's first launch is being measured when another thread launches it and the driver
    loads it in that call (8 MiB): that call is measured too, so the bytes are the code's, not
    unexplained (as four threads' first matmuls left 20 MiB on an H100)."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, {}, ["race"])
    same_values(c, plain, pre, ["used_launched_mib"])
    c.eq("plain: the driver's used figure (MiB)", [plain.val(k) for k in ("used_launched_mib", "used_at_exit_mib")],
         [24, 8])
    c.eq("preload: the second launch ran inside the first one's hook", pre.val("second_inside_first"), 1)
    acc = pre.report()["devices"][0].get("device_accounting", {})
    code = "the driver: modules and kernels loaded after the first allocation, local memory"
    c.eq("at exit: the split (MiB)", accounting_split(acc.get("at_exit", {})),
         (24, {"gpumemprof's pool: cached, free": 16, code: 8}, 0))
    return c.finish([plain, pre])


def case_vmm_first(args, tmp):
    """The device's first memory is VMM (cuMemCreate), as under PyTorch's expandable segments:
    the baseline (the context before any allocation) is read before the pages exist, so they
    are counted once, as VMM memory, and nothing is left unexplained."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    same_values(c, plain, pre, ["used_before_first_alloc_mib", "done"])
    # The 8 MiB of pages and the pool's 20 MiB segment for the 4 MiB block (plain: 4 MiB).
    c.eq("plain: used with both (MiB)", plain.val("used_with_both_mib"), 12)
    c.eq("preload: used with both (MiB)", pre.val("used_with_both_mib"), 28)
    # The preload's cudaMemGetInfo counts the pool's whole free segment as free (case_mem_get_info).
    c.eq("plain, preload: used with 32 MiB more pages (MiB)",
         [plain.val("used_with_more_pages_mib"), pre.val("used_with_more_pages_mib")], [40, 40])
    acc = pre.report()["devices"][0].get("device_accounting", {})
    vmm = "VMM physical memory (cuMemCreate)"
    # The peak is the 32 MiB of pages, given back before exit: a reading was due when they came.
    c.eq("at the peak: the driver's used figure split (MiB)", accounting_split(acc),
         (60, {"gpumemprof's pool: cached, free": 20, vmm: 40}, 0))
    c.eq("at exit: the split (MiB)", accounting_split(acc.get("at_exit", {})),
         (28, {"gpumemprof's pool: cached, free": 20, vmm: 8}, 0))
    # The 200 mappings of 2 MiB take none (one each, when the gate's total leaves out the pages
    # the last reading counted).
    readings = acc.get("readings", 0)
    c.true("readings taken (the 2 MiB mappings take none)", 0 < readings <= 6, readings)
    return c.finish([plain, pre])


def case_passthrough_kinds(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: done" % r.label, r.val("done"), 1)
    for name in ("cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocManaged", "cuMemAllocHost_v2", "cuMemCreate",
                 "cuMemMap", "cuMemUnmap", "cuMemRelease"):
        c.eq("sim %s ok: passed through unchanged" % name, pre.sim_ok(name), plain.sim_ok(name))
    rep = pre.report()
    # None of these is a pool allocation ...
    check_stats(c, rep, {
        "allocation.all.allocated": 0,
        "segment.all.allocated": 0,
        "allocated_bytes.all.allocated": 0,
        "reserved_bytes.all.peak": 0,
        # ... but the VMM map/unmap count as device allocations, as in PyTorch's expandable segments.
        "num_device_alloc": 1,
        "num_device_free": 1,
    })
    dev = device_entry(rep) or {}
    pt = dev.get("passthrough", {})
    check_passthrough_kind(c, pt.get("async"), "passthrough.async", 1, 1, 0, 4 * MIB, 4 * MIB)
    check_passthrough_kind(c, pt.get("managed"), "passthrough.managed", 1, 1, 0, 3 * MIB, 3 * MIB)
    check_passthrough_kind(c, pt.get("vmm_physical"), "passthrough.vmm_physical", 1, 1, 0, 2 * MIB, 2 * MIB)
    check_passthrough_kind(c, pt.get("vmm_mapped"), "passthrough.vmm_mapped", 1, 1, 0, 2 * MIB, 2 * MIB)
    check_passthrough_kind(c, (rep or {}).get("host_pinned"), "host_pinned", 1, 1, 0, MIB, MIB)
    # The driver keeps memory of its own once managed memory was used (about 110 MiB on an H100,
    # after the free too): the accounting says so where it counts the unexplained part.
    acc = [d["device_accounting"] for d in (rep or {}).get("devices", []) if "device_accounting" in d]
    c.eq("device_accounting.managed_used", [a.get("managed_used") for a in acc], [True])
    txt = report_text(pre)
    c.true(".txt: the unexplained part names managed memory",
           "what it keeps for managed memory (after the frees too)" in txt, txt[txt.find("unexplained"):][:400])
    return c.finish([plain, pre])


def case_bad_free(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    # Driver: CUDA_ERROR_INVALID_VALUE -> cudaErrorInvalidValue (1) for all three.
    for k in ("double_free", "interior_free", "unknown_free", "last_error"):
        c.eq("plain: %s" % k, plain.val(k), 1)
    c.eq("plain: last_error_after", plain.val("last_error_after"), 0)
    same_values(c, plain, pre, ["double_free", "interior_free", "unknown_free", "last_error",
                                "last_error_after",
                                "program_mallocs"])
    rep = pre.report()
    dev = device_entry(rep) or {}
    invalid = dev.get("invalid_frees", 0) + (rep or {}).get("foreign_invalid_frees", 0)
    c.eq("invalid_frees (+ foreign_invalid_frees)", invalid, 3)
    # 4096, 8192, 4096: three small blocks in one 2 MiB segment; the bad frees change nothing.
    check_stats(c, rep, {
        "allocation.all.allocated": 3,
        "allocation.all.freed": 3,
        "allocation.all.current": 0,
        "segment.all.allocated": 1,
        "allocated_bytes.all.allocated": 4096 + 8192 + 4096,
    })
    return c.finish([plain, pre])


def case_oom(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, {"SIMCUDA_CAPACITY": "64M"})
    # 5 x 12 MiB = 60 MiB; free one; 14 MiB fits (62 MiB); one more 12 MiB does not: OOM (code 2).
    expected = {"alloc_14m": 0, "more_12m": 0, "oom_code": 2, "last_error": 2, "alloc_after_oom": 0,
                "alloc_1eib": 2}
    for r in (plain, pre):
        for k, v in expected.items():
            c.eq("%s: %s" % (r.label, k), r.val(k), v)
    # Under the pool: the freed 12 MiB stays cached, so the 14 MiB cudaMalloc fails once, the pool
    # frees its cached segment (release_cached_blocks: num_device_free 1, num_sync_all_streams 1) and
    # retries (num_alloc_retries 1): success. The last 12 MiB: fails, nothing cached to free
    # (num_sync_all_streams 2), retry (num_alloc_retries 2) fails: num_ooms 1.
    # Segments: 5 x 12 MiB + 14 MiB + the 2 MiB small segment of the final 1 MiB request = 7
    # (48 + 14 + 2 = 64 MiB, exactly the capacity).
    check_stats(c, pre.report(), {
        "num_ooms": 1,
        "num_alloc_retries": 2,
        "num_sync_all_streams": 2,
        "num_device_alloc": 7,
        "num_device_free": 1,
        "allocation.all.allocated": 7,
        "segment.all.allocated": 7,
        "segment.all.freed": 1,
    })
    c.eq("preload: sim cuMemAlloc_v2 ok", pre.sim_ok("cuMemAlloc_v2"), 7)
    c.eq("preload: sim cuMemFree_v2 ok", pre.sim_ok("cuMemFree_v2"), 1)
    # Both refusals are in the report's OOM list, the 1 EiB one too (PyTorch refuses it before
    # its allocator, so num_ooms above stays 1).
    ooms = (pre.report() or {}).get("ooms", [])
    c.eq("preload: OOMs listed", len(ooms), 2)
    c.eq("preload: the 1 EiB request is listed", [o.get("requested") for o in ooms if o.get("requested") == 1 << 60],
         [1 << 60])
    # expandable_segments:True on the same 64 MiB device: one large range of 4 x 20 MiB pages.
    # 12 MiB blocks at 0, 12, 24, 36, 48 MiB take three pages (60 MiB mapped). The freed block at
    # 48 MiB plus 2 MiB more would serve the 14 MiB, but that needs a fourth 20 MiB page (80 > 64):
    # out of memory; release_cached_blocks finds no whole free page (page 2 is 40..60 MiB, the free
    # block 48..60 MiB), the retry fails: OOM 1. The next 12 MiB takes the free block; the one after
    # needs the fourth page again: OOM 2. After the frees the 1 MiB request maps a 2 MiB small page
    # (62 MiB <= 64). As with PyTorch's expandable segments the 14 MiB request fails here where plain
    # cudaMalloc succeeds: pages are 20 MiB.
    exp = run_prog(args, tmp, "expandable", True,
                   {"SIMCUDA_CAPACITY": "64M", "GPUMEMPROF_ALLOC_CONF": "expandable_segments:True"})
    c.eq("expandable: exit code", exp.rc, 0)
    for k, v in {"alloc_14m": 2, "more_12m": 1, "oom_code": 2, "alloc_after_oom": 0}.items():
        c.eq("expandable: %s" % k, exp.val(k), v)
    check_stats(c, exp.report(), {
        "num_ooms": 2,
        "num_alloc_retries": 2,
        "num_device_alloc": 4,
        "num_device_free": 0,
        "segment.all.allocated": 0,
        "reserved_bytes.all.current": 62 * 1048576,
    })
    c.eq("expandable: sim cuMemAlloc_v2 calls", exp.sim_calls("cuMemAlloc_v2"), 0)
    # Every page created is mapped (no page kept from a failed mapping): the device's bytes in use
    # at exit are the pool's reserved bytes.
    c.eq("expandable: sim bytes in use at exit", sum(r.get("bytes_in_use", 0) for r in exp.sim), 62 * 1048576)
    return c.finish([plain, pre, exp])


def case_cross_stream_reuse(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: corrupt reads of A (of 20)" % r.label, r.val("corrupt"), 0)
    check_stats(c, pre.report(), {"allocation.all.allocated": 40, "allocation.all.freed": 40})
    # PyTorch's allocator on the same requests (the model) reuses A's block for B at once: one
    # 2 MiB small-pool segment serves all 40 requests, never more than 1 MiB allocated. The pool
    # cannot hand A's block out at once (A is still being read): on the miss it waits for A's
    # fence instead of growing, so it holds no more than the model either.
    rep = pre.report()
    for key, value in {"reserved_bytes.all.peak": 2 * MIB, "num_device_alloc": 1, "segment.all.peak": 1,
                       "allocation.all.allocated": 40, "allocated_bytes.all.peak": MIB}.items():
        c.eq("pytorch_model[%s]" % key, model_stat(rep, key), value)
    c.eq("pool's own reserved peak: the model's", stat(rep, "reserved_bytes.all.peak"), 2 * MIB)
    dev = rep["devices"][0]
    c.eq("pool: no wait timed out", dev["pool_counters"]["wait_timeouts"], 0)
    # A freed block is not the program's any more, even while it waits (PyTorch's rule).
    c.eq("memory_stats[active_bytes.all.peak] = the allocated peak", stat(rep, "active_bytes.all.peak"), MIB)
    c.ge("pending_free blocks_total", dev["pending_free"]["blocks_total"], 20)
    # Negative control: PyTorch's immediate reuse hands A's memory to B while the host function
    # still reads it. The program must see that, or the zero above proves nothing.
    unsafe = run_prog(args, tmp, "immediate", True, {"GPUMEMPROF_REUSE": "immediate"})
    c.eq("immediate reuse: exit code", unsafe.rc, 0)
    c.ge("immediate reuse: corrupt reads of A", unsafe.val("corrupt"), 1)
    return c.finish([plain, pre, unsafe])


def case_library_stream(args, tmp):
    """A stream cuDNN makes for itself (here libcudnn_sim) leaves reuse at once on; the program's
    own stream ends it, and the reports say why and at which line of the program."""
    c = Checker(args.case)
    # Events complete 2 ms after they are recorded: a fenced block cannot be reused at once.
    delay = {"SIMCUDA_EVENT_DELAY_US": "2000"}
    lib = run_prog(args, tmp, "library_only", True, delay)
    own = run_prog(args, tmp, "own_stream", True, dict(delay, OWN_STREAM="1"))
    for r in (lib, own):
        c.eq("%s: exit code" % r.label, r.rc, 0)
        c.eq("%s: done" % r.label, r.val("done"), 1)
        check_stats(c, r.report(), {"allocation.all.allocated": 100, "allocation.all.freed": 100})
    reuse = (lib.report() or {}).get("reuse", {})
    c.eq("library_only: reuse.mode", reuse.get("mode"), "auto")
    c.eq("library_only: reuse.at_once", reuse.get("at_once"), True)
    c.eq("library_only: reuse.library_streams", reuse.get("library_streams"), 1)
    c.eq("library_only: no reason to stop", reuse.get("stopped_because"), None)
    c.eq("library_only: deferred frees", device_entry(lib.report())["pool_counters"]["deferred_frees"], 0)
    txt = report_text(lib)
    c.true("library_only: .txt says freed memory is reused at once",
           "freed memory is reused at once (GPUMEMPROF_REUSE=auto)" in txt)
    reuse = (own.report() or {}).get("reuse", {})
    c.eq("own_stream: reuse.at_once", reuse.get("at_once"), False)
    c.eq("own_stream: reuse.stopped_because", reuse.get("stopped_because"), "the program created a stream")
    where = reuse.get("stopped_at") or []
    c.true("own_stream: stopped_at names the program's line first",
           bool(where) and os.path.basename(where[0]) == "prog_library_stream.cpp:19:main", where[:3])
    c.eq("own_stream: deferred frees (every free waits)",
         device_entry(own.report())["pool_counters"]["deferred_frees"], 100)
    # A fence marks the legacy stream and the program's own stream, our join stream waits for
    # both marks, and the fence's one event is recorded there: 3 records and 2 waits a fence.
    # cuDNN's stream is no fence target (it would add a record and a wait to each fence). Each
    # created non-blocking stream also waits once for the legacy stream (a record and a wait).
    fences = device_entry(own.report())["pool_counters"]["fences_recorded"]
    c.ge("own_stream: fences recorded", fences, 1)
    c.eq("own_stream: cuEventRecord calls (3 a fence, 1 per created stream)",
         own.sim_calls("cuEventRecord"), 3 * fences + 2)
    c.eq("own_stream: cuStreamWaitEvent calls (2 a fence, 1 per created stream)",
         own.sim_calls("cuStreamWaitEvent"), 2 * fences + 2)
    line = [ln for ln in report_text(own).splitlines() if ln.startswith("freed memory")]
    c.true("own_stream: .txt gives the reason and the line",
           len(line) == 1 and line[0].startswith("freed memory waits for the device before reuse "
                                                 "(GPUMEMPROF_REUSE=auto): the program created a stream at ")
           and line[0].split(" at ", 1)[1].split(" < ")[0].endswith("/prog_library_stream.cpp:19:main"), line)
    # With stack capture off the reports still name the line (native frames only).
    nostack = run_prog(args, tmp, "own_stream_no_stacks", True, dict(delay, OWN_STREAM="1", GPUMEMPROF_STACK_DEPTH="0"))
    where = ((nostack.report() or {}).get("reuse") or {}).get("stopped_at") or []
    c.true("own_stream, stacks off: stopped_at names the program's line first",
           bool(where) and os.path.basename(where[0]) == "prog_library_stream.cpp:19:main", where[:3])
    # No call-site accounting: the .txt says so rather than a process-wide peak of 0 bytes.
    txt = report_text(nostack)
    c.true("stacks off: the .txt says the process-wide figures were not kept",
           "process-wide peak and live blocks: not kept (call-site accounting off" in txt
           and "process-wide peak of live bytes" not in txt)
    return c.finish([lib, own, nostack])


def case_mem_get_info(args, tmp):
    c = Checker(args.case)
    # Events complete 5 ms after they are recorded (a device that trails the host): a fence
    # recorded by the query itself cannot be done when the query polls it.
    plain, pre = both_ran(c, args, tmp, {"SIMCUDA_EVENT_DELAY_US": "5000"})
    for r in (plain, pre):
        c.eq("%s: total (SIMCUDA_CAPACITY default 16 GiB)" % r.label, r.val("total"), 16 << 30)
    # Without the pool "free" drops by what the program holds (512-byte units):
    # 3 MiB + 1024, then 1024 once a is freed, then 0.
    c.eq("plain: drop_both_live", plain.val("drop_both_live"), 3 * MIB + 1024)
    c.eq("plain: drop_b_live", plain.val("drop_b_live"), 1024)
    c.eq("plain: drop_none_live", plain.val("drop_none_live"), 0)
    # With the pool it drops by the segments that hold live blocks (wholly free cached segments are
    # reported as free): 20 MiB + 2 MiB while both live, 2 MiB (b's small segment) once a is freed
    # (its 20 MiB segment is wholly free), 0 once both are freed.
    c.eq("preload: drop_both_live", pre.val("drop_both_live"), 22 * MIB)
    c.eq("preload: drop_b_live", pre.val("drop_b_live"), 2 * MIB)
    c.eq("preload: drop_none_live", pre.val("drop_none_live"), 0)
    # 100 x 10 MiB freed, then cudaDeviceSynchronize: the first query sees every byte free again
    # (the blocks waited for fences; the synchronize proves the device passed them).
    for r in (plain, pre):
        c.eq("%s: drop_after_100_frees_sync" % r.label, r.val("drop_after_100_frees_sync"), 0)
    # a 10 MiB request splits the cached 20 MiB segment of a: two of them fit there, 98 get their own
    check_stats(c, pre.report(), {"reserved_bytes.all.current": 22 * MIB + 98 * 10 * MIB})
    return c.finish([plain, pre])


def case_pool_off(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, {"GPUMEMPROF_POOL": "0"})
    n = pre.val("program_mallocs")
    c.eq("program_mallocs", n, 6)
    c.eq("preload: sim cuMemAlloc_v2 ok == program mallocs", pre.sim_ok("cuMemAlloc_v2"), n)
    c.eq("preload: sim cuMemFree_v2 ok == program frees", pre.sim_ok("cuMemFree_v2"),
         pre.val("program_frees"))
    rep = pre.report()
    c.eq("pool", (rep or {}).get("pool"), "passthrough")
    c.eq("no reuse section (the driver frees)", "reuse" in (rep or {}), False)
    check_stats(c, rep, {
        "allocation.all.allocated": 6,
        "allocation.all.freed": 6,
        "num_device_alloc": 6,
        "num_device_free": 6,
    })
    # expandable_segments:True cannot apply without the pool: one warning naming it, no VMM call.
    exp = run_prog(args, tmp, "expandable", True,
                   {"GPUMEMPROF_POOL": "0", "GPUMEMPROF_ALLOC_CONF": "expandable_segments:True"})
    c.eq("pool off + expandable: warnings naming it",
         len([l for l in exp.stderr.splitlines() if "expandable_segments:True" in l]), 1)
    c.eq("pool off + expandable: sim cuMemCreate calls", exp.sim_calls("cuMemCreate"), 0)
    return c.finish([plain, pre, exp])


def case_bad_config(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, {"GPUMEMPROF_ALLOC_CONF": "max_split_size_mb:abc"})
    lines = [l for l in pre.stderr.splitlines() if "abc" in l]
    c.eq("stderr lines naming 'abc'", len(lines), 1)
    rep = pre.report()
    c.eq("alloc_conf (defaults in effect)", (rep or {}).get("alloc_conf"), "")
    check_stats(c, rep, {
        "allocation.all.allocated": SEQUENCE_STATS["allocation.all.allocated"],
        "segment.all.allocated": SEQUENCE_STATS["segment.all.allocated"],
        "reserved_bytes.all.peak": SEQUENCE_STATS["reserved_bytes.all.peak"],
        "max_split_size": -1,  # default: unlimited
    })
    # GPUMEMPROF_MODEL: a bad value is one warning and the default (on); 0 drops the model.
    bad_model = run_prog(args, tmp, "model_bad", True, {"GPUMEMPROF_MODEL": "maybe"})
    c.eq("GPUMEMPROF_MODEL=maybe: stderr lines naming 'maybe'",
         len([l for l in bad_model.stderr.splitlines() if "maybe" in l]), 1)
    c.eq("GPUMEMPROF_MODEL=maybe: model on (default)", model_stat(bad_model.report(), "num_device_alloc"),
         SEQUENCE_STATS["num_device_alloc"])
    no_model = run_prog(args, tmp, "model_off", True, {"GPUMEMPROF_MODEL": "0"})
    c.eq("GPUMEMPROF_MODEL=0: no pytorch_model section",
         "pytorch_model" in (device_entry(no_model.report(), 0) or {}), False)
    c.eq("GPUMEMPROF_MODEL=0: the pool's own stats unchanged", stat(no_model.report(), "reserved_bytes.all.peak"),
         SEQUENCE_STATS["reserved_bytes.all.peak"])
    # Unset, the model follows stack capture: off with GPUMEMPROF_STACK_DEPTH=0 unless asked for.
    lean = run_prog(args, tmp, "lean", True, {"GPUMEMPROF_STACK_DEPTH": "0"})
    c.eq("GPUMEMPROF_STACK_DEPTH=0: no pytorch_model section",
         "pytorch_model" in (device_entry(lean.report(), 0) or {}), False)
    lean_model = run_prog(args, tmp, "lean_model", True, {"GPUMEMPROF_STACK_DEPTH": "0", "GPUMEMPROF_MODEL": "1"})
    c.eq("GPUMEMPROF_STACK_DEPTH=0 GPUMEMPROF_MODEL=1: model on", model_stat(lean_model.report(), "num_device_alloc"),
         SEQUENCE_STATS["num_device_alloc"])
    return c.finish([plain, pre, bad_model, no_model, lean, lean_model])


def case_ipc(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    off = run_prog(args, tmp, "pool_off", True, {"GPUMEMPROF_POOL": "0"})
    for r in (plain, pre, off):
        c.eq("%s: exit code" % r.label, r.rc, 0)
        c.eq("%s: handle of a (its own base)" % r.label, r.val("ipc_a"), 0)
        c.eq("%s: handle of a names a's address" % r.label, r.val("ipc_a_base_is_a"), 1)
    # Without the pool every block is its own device allocation: both handles are fine.
    for r in (plain, off):
        c.eq("%s: handle of b" % r.label, r.val("ipc_b"), 0)
        c.eq("%s: last_error" % r.label, r.val("last_error"), 0)
        c.eq("%s: sim cuIpcGetMemHandle ok" % r.label, r.sim_ok("cuIpcGetMemHandle"), 2)
    # Pool: b sits 3 MiB (3145728 bytes) into a's 20 MiB segment; a receiver would map the segment
    # from its base, so the handle is refused with cudaErrorInvalidValue (1), left as last error.
    c.eq("preload: b's offset in the segment", pre.val("b_offset_from_a"), 3 * MIB)
    c.eq("preload: handle of b refused", pre.val("ipc_b"), 1)
    c.eq("preload: last_error", pre.val("last_error"), 1)
    c.eq("preload: sim cuIpcGetMemHandle ok (a only)", pre.sim_ok("cuIpcGetMemHandle"), 1)
    dev = device_entry(pre.report()) or {}
    c.eq("preload: devices[0].ipc_refused", dev.get("ipc_refused"), 1)
    dev_off = device_entry(off.report()) or {}
    c.eq("pool_off: pool", (off.report() or {}).get("pool"), "passthrough")
    c.eq("pool_off: devices[0].ipc_refused", dev_off.get("ipc_refused"), 0)
    return c.finish([plain, pre, off])


CAPTURE_CODES = {
    "begin": 0, "captured_memset": 0, "stream_create": 0, "free_x": 0, "malloc_y": 0, "memset_y": 0,
    "sync_y": 0, "is_capturing": 0, "capture_status": 1, "end": 0, "graph": 1, "last_error": 0,
}


def case_capture(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    # Relaxed mode allows cudaMalloc/cudaFree and work on other streams during the capture: every
    # call succeeds without the profiler, and must with it (same codes).
    for k, v in CAPTURE_CODES.items():
        c.eq("plain: %s" % k, plain.val(k), v)
    same_values(c, plain, pre, list(CAPTURE_CODES))
    c.eq("preload: 3 MiB after the capture is x's block again", pre.val("z_reuses_x"), 1)
    # Segments: x+w fill one 20 MiB segment, scratch one 2 MiB, y (20 MiB, during the capture) one
    # 20 MiB; z reuses x: 3 device allocations, 42 MiB. Bytes 3145728 + 17825792 + 4096 + 20971520 +
    # 3145728 = 45092864.
    check_stats(c, pre.report(), {
        "allocation.all.allocated": 5,
        "allocation.all.freed": 5,
        "segment.all.allocated": 3,
        "num_device_alloc": 3,
        "allocated_bytes.all.allocated": 45092864,
        "reserved_bytes.all.current": 42 * MIB,
    })
    c.eq("preload: sim cuMemAlloc_v2 ok", pre.sim_ok("cuMemAlloc_v2"), 3)
    return c.finish([plain, pre])


def case_device_reset(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: cudaDeviceReset" % r.label, r.val("reset"), 0)
        c.eq("%s: post-reset block is not at a's address" % r.label, r.val("c_is_a"), 0)
    # a died with the context: the driver answers cudaErrorInvalidValue (1).
    c.eq("plain: free of a pre-reset pointer", plain.val("free_old_a"), 1)
    same_values(c, plain, pre, ["free_old_a", "last_error"])
    rep = pre.report() or {}
    entries = [d for d in rep.get("devices", []) if d.get("device") == 0]
    c.eq("preload: device 0 entries (old pool, new pool)", len(entries), 2)
    if len(entries) == 2:
        old, new = entries
        c.eq("old pool: context_alive", old.get("context_alive"), False)
        c.eq("new pool: context_alive", new.get("context_alive"), True)
        # Old: a (1 MiB, 2 MiB segment) and b (3 MiB, 20 MiB segment); b freed, a dropped with the
        # context: it counts as freed, so that allocated - freed = current holds; peak reserved 22 MiB.
        check_stats(c, {"devices": [old]}, {
            "allocation.all.allocated": 2,
            "allocation.all.freed": 2,
            "segment.all.freed": 2,
            "reserved_bytes.all.freed": 22 * MIB,
            "allocation.all.current": 0,
            "segment.all.allocated": 2,
            "reserved_bytes.all.current": 0,
            "reserved_bytes.all.peak": 22 * MIB,
        }, prefix="old memory_stats")
        # New: c (5 MiB, 20 MiB segment), freed.
        check_stats(c, {"devices": [new]}, {
            "allocation.all.allocated": 1,
            "allocation.all.freed": 1,
            "segment.all.allocated": 1,
            "reserved_bytes.all.current": 20 * MIB,
        }, prefix="new memory_stats")
    # The stale pointer may now lie inside the new pool's segment (the driver reuses address space):
    # then the pool refuses it, else the driver does. Either way exactly one invalid free is counted.
    invalid = sum(d.get("invalid_frees", 0) for d in entries) + rep.get("foreign_invalid_frees", 0)
    c.eq("preload: invalid_frees + foreign_invalid_frees (the pre-reset free)", invalid, 1)
    # The memory the reset dropped is not live any more: a (1 MiB) died with the old
    # context before c (5 MiB) was made, so at most 5 MiB were ever live at once, none at exit.
    c.eq("preload: process-wide peak of live bytes", (rep.get("peak") or {}).get("bytes"), 5 * MIB)
    c.eq("preload: leaks at exit (bytes)", (rep.get("leaks") or {}).get("bytes"), 0)
    return c.finish([plain, pre])


# ---- prog_alloc_sequence with expandable_segments:True, by hand (PyTorch's map_block and split rule) ----
# a = 1000 B -> 1024, small pool: a new small range, one 2 MiB page mapped; b = 1 MiB fits behind a.
# c = 3 MiB: a new large range, one 20 MiB page; the 17 MiB behind c stay free.
# d = 25 MiB: the free 17 MiB plus one more 20 MiB page mapped behind them (37 MiB), d takes the first
#     25 MiB (expandable blocks split at any remainder >= 512 B: d's block is 25 MiB, not 26).
# free a; e = 700 -> a's 1024 bytes. free c; f = 5 MiB -> the free 12 MiB behind d (no new page).
# allocated: 1024 + 1048576 + 3145728 + 26214400 = 30409728; -1024 +1024; -3145728 +5242880 = 32506880
# (peak); cumulative 35653632; large pool peak 26214400 + 5242880 = 31457280.
# reserved: 2 MiB + 40 MiB = 44040192, three maps, no segment (PyTorch counts pages, not segments).
EXPANDABLE_STATS = {
    "allocation.all.allocated": 6,
    "allocation.small_pool.allocated": 3,
    "allocated_bytes.all.peak": 32506880,
    "allocated_bytes.all.allocated": 35653632,
    "allocated_bytes.large_pool.peak": 31457280,
    "requested_bytes.all.allocated": 35653284,
    "reserved_bytes.all.peak": 44040192,
    "reserved_bytes.all.current": 44040192,
    "reserved_bytes.small_pool.peak": 2097152,
    "segment.all.allocated": 0,
    "inactive_split_bytes.all.peak": 0,
    "num_device_alloc": 3,
    "num_device_free": 0,
    "num_ooms": 0,
}


def case_expandable(args, tmp):
    c = Checker(args.case)
    trace = os.path.join(tmp, "expandable.gmt")
    env = {"GPUMEMPROF_ALLOC_CONF": "expandable_segments:True", "GPUMEMPROF_TRACE": trace}
    plain, pre = both_ran(c, args, tmp, env)
    for r in (plain, pre):
        c.eq("%s: program_mallocs" % r.label, r.val("program_mallocs"), 6)
    c.eq("preload: no warning about the setting",
         [l for l in pre.stderr.splitlines() if "expandable" in l], [])
    # The device sees pages, not allocations: 2 ranges reserved, 3 pages created and mapped, access
    # granted once per mapping, no cuMemAlloc at all.
    c.eq("preload: sim cuMemAlloc_v2 calls", pre.sim_calls("cuMemAlloc_v2"), 0)
    c.eq("preload: sim cuMemAddressReserve ok", pre.sim_ok("cuMemAddressReserve"), 2)
    c.eq("preload: sim cuMemCreate ok", pre.sim_ok("cuMemCreate"), 3)
    c.eq("preload: sim cuMemMap ok", pre.sim_ok("cuMemMap"), 3)
    c.eq("preload: sim cuMemSetAccess calls", pre.sim_calls("cuMemSetAccess"), 3)
    rep = pre.report()
    c.eq("alloc_conf", (rep or {}).get("alloc_conf"), "expandable_segments:True")
    check_stats(c, rep, EXPANDABLE_STATS)
    for key, value in EXPANDABLE_STATS.items():
        c.eq("pytorch_model[%s]" % key, model_stat(rep, key), value)
    # The torch-shaped snapshot: one segment per mapped range, marked expandable, and the maps in
    # the trace (2 MiB small page, then two 20 MiB pages).
    pickles = glob.glob(os.path.join(pre.out_dir, "out-*.pickle"))
    c.eq("preload: one .pickle", len(pickles), 1)
    if pickles:
        import pickle
        with open(pickles[0], "rb") as f:
            snap = pickle.load(f)
        segs = snap.get("segments", [])
        c.eq("pickle: segments expandable", [sg.get("is_expandable") for sg in segs], [True] * len(segs))
        c.eq("pickle: mapped bytes", sum(sg.get("total_size", 0) for sg in segs), 44040192)
        maps = [(e["action"], e["size"]) for e in (snap.get("device_traces") or [[]])[0]
                if e["action"].startswith("segment")]
        c.eq("pickle: segment events", maps, [("segment_map", 2097152), ("segment_map", 20971520),
                                              ("segment_map", 20971520)])
    text = report_text(pre)
    c.true(".txt: page maps/unmaps line", "page maps/unmaps (expandable segments): 3 / 0," in text, text[:1500])
    # The trace replays with the recorded setting to the same peak; without it the plain policy's.
    for conf, want in ((None, 44040192), ("", SEQUENCE_STATS["reserved_bytes.all.peak"])):
        label = "replay --json" + ("" if conf is None else " --conf '%s'" % conf)
        replay = cli_replay(c, args, trace, label, conf)
        c.eq("%s: reserved peak" % label, stat(replay, "reserved_bytes.all.peak"), want)
    return c.finish([plain, pre])
