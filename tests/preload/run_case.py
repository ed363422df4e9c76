#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Run one preload case: the program once without and once with LD_PRELOAD=libgpumemprof.so against
# the simulated driver, then check its output, the simulated driver's call counts (SIMCUDA_LOG) and
# the profiler's exit JSON against values computed by hand from PyTorch's allocator rules.
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

MIB = 1 << 20


class Run:
    def __init__(self, label, rc, stdout, stderr, reports, sim):
        self.label, self.rc, self.stdout, self.stderr = label, rc, stdout, stderr
        self.reports = reports  # list of parsed JSON reports (one per process)
        self.sim = sim          # list of SIMCUDA_LOG records (one per process)
        self.values = {}
        for line in stdout.splitlines():
            if "=" in line and not line.startswith("FAIL"):
                k, v = line.split("=", 1)
                self.values[k] = v

    def val(self, key):
        v = self.values.get(key)
        try:
            return int(v)
        except (TypeError, ValueError):
            return v

    def report(self, pid=None):
        """The report of `pid` (default: the only/first one)."""
        for r in self.reports:
            if pid is None or r.get("pid") == pid:
                return r
        return None

    def sim_ok(self, name, pid=None):
        """Successful calls of a driver entry point seen by the simulated driver (process `pid` or all)."""
        return sum(r.get("ok", {}).get(name, 0) for r in self.sim if pid is None or r.get("pid") == pid)

    def sim_calls(self, name):
        return sum(r.get("calls", {}).get(name, 0) for r in self.sim)


class Checker:
    def __init__(self, case):
        self.case = case
        self.rows = []
        self.failed = 0

    def eq(self, what, actual, expected):
        ok = actual == expected
        self.failed += not ok
        self.rows.append((ok, what, actual, expected))

    def ge(self, what, actual, minimum):
        ok = isinstance(actual, int) and actual >= minimum
        self.failed += not ok
        self.rows.append((ok, what, actual, ">= %s" % minimum))

    def true(self, what, cond, detail=""):
        self.failed += not cond
        self.rows.append((bool(cond), what, detail, "true"))

    def finish(self, runs):
        print("case %s: %d checks, %d failed" % (self.case, len(self.rows), self.failed))
        width = max([len(r[1]) for r in self.rows] + [10])
        for ok, what, actual, expected in self.rows:
            mark = "ok  " if ok else "FAIL"
            line = "  %s %-*s actual=%s" % (mark, width, what, actual)
            if not ok:
                line += "  expected=%s" % (expected,)
            print(line)
        if self.failed:
            for r in runs:
                print("---- run '%s': rc=%s" % (r.label, r.rc))
                print("stdout:\n" + r.stdout.rstrip())
                print("stderr (last 40 lines):\n" + "\n".join(r.stderr.rstrip().splitlines()[-40:]))
                print("reports: %d, sim logs: %s" % (len(r.reports), json.dumps(r.sim)[:2000]))
        return 1 if self.failed else 0


def device_entry(report, device=0):
    """The devices[] entry of `device`; with several contexts, the one that served the most mallocs."""
    if not report:
        return None
    entries = [d for d in report.get("devices", []) if d.get("device") == device]
    if not entries:
        return None
    return max(entries, key=lambda d: d.get("memory_stats", {}).get("allocation.all.allocated", 0))


def stat(report, key, device=0):
    d = device_entry(report, device)
    if d is None:
        return "<no devices[%d] entry>" % device
    return d.get("memory_stats", {}).get(key, "<missing %s>" % key)


def run_prog(args, tmp, label, preload, extra_env=None, argv=()):
    out_dir = os.path.join(tmp, label)
    os.makedirs(out_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEMPROF_", "SIMCUDA_"))}
    env.pop("LD_PRELOAD", None)
    lib_path = [os.path.abspath(args.sim_dir), os.path.dirname(os.path.abspath(args.prog))]
    if env.get("LD_LIBRARY_PATH"):
        lib_path.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = ":".join(lib_path)
    env["SIMCUDA_LOG"] = os.path.join(out_dir, "sim-%p.log")
    env["GPUMEMPROF_OUTPUT"] = os.path.join(out_dir, "out-%p")
    if preload:
        env["LD_PRELOAD"] = os.path.abspath(args.lib)
    env.update(extra_env or {})
    try:
        p = subprocess.run([args.prog, *argv], env=env, capture_output=True, text=True, timeout=120)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        so = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        se = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    reports = []
    for path in sorted(glob.glob(os.path.join(out_dir, "out-*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as e:
            reports.append({"_error": "%s: %s" % (path, e)})
    sim = []
    for path in sorted(glob.glob(os.path.join(out_dir, "sim-*.log"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    sim.append(json.loads(line))
    return Run(label, rc, so, se, reports, sim)


def both(args, tmp, extra_env=None):
    return (run_prog(args, tmp, "plain", False, extra_env),
            run_prog(args, tmp, "preload", True, extra_env))


def check_stats(c, report, expected, prefix="memory_stats"):
    for key, value in expected.items():
        c.eq("%s[%s]" % (prefix, key), stat(report, key), value)


def same_values(c, plain, pre, keys):
    for k in keys:
        c.eq("stdout %s: same with/without preload" % k, pre.val(k), plain.val(k))


def check_passthrough_kind(c, kind_obj, name, calls, frees, current, peak, total):
    if not isinstance(kind_obj, dict):
        c.true("%s present" % name, False, kind_obj)
        return
    for k, v in (("calls", calls), ("frees", frees), ("current_bytes", current), ("peak_bytes", peak),
                 ("total_bytes", total)):
        c.eq("%s.%s" % (name, k), kind_obj.get(k), v)


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
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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
        c.eq("version", rep.get("version"), 1)
        check_stats(c, rep, SEQUENCE_STATS)
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
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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


def case_dlsym_lookup(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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


def case_passthrough_kinds(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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
    return c.finish([plain, pre])


def case_bad_free(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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
    plain, pre = both(args, tmp, {"SIMCUDA_CAPACITY": "64M"})
    # 5 x 12 MiB = 60 MiB; free one; 14 MiB fits (62 MiB); one more 12 MiB does not: OOM (code 2).
    expected = {"alloc_14m": 0, "more_12m": 0, "oom_code": 2, "last_error": 2, "alloc_after_oom": 0}
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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
    return c.finish([plain, pre])


def case_cross_stream_reuse(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
        c.eq("%s: corrupt reads of A (of 20)" % r.label, r.val("corrupt"), 0)
    check_stats(c, pre.report(), {"allocation.all.allocated": 40, "allocation.all.freed": 40})
    return c.finish([plain, pre])


def case_mem_get_info(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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
    check_stats(c, pre.report(), {"reserved_bytes.all.current": 22 * MIB})
    return c.finish([plain, pre])


def case_fork_child(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
        c.eq("%s: child exit status" % r.label, r.val("child_status"), 0)
    parent, child = pre.val("parent_pid"), pre.val("child_pid")
    c.eq("preload: reports written (parent + child)", len(pre.reports), 2)
    pids = [r.get("pid") for r in pre.reports]
    c.true("child report has the child's pid", pre.report(child) is not None, pids)
    rep = pre.report(parent)
    c.true("parent report has the parent's pid", rep is not None, pids)
    # Parent: 1 MiB + 1 MiB fill one 2 MiB small segment; b freed; c = 1000 -> 1024 reuses b's
    # block; a freed: 3 allocations, 1 segment, unaffected by the child.
    check_stats(c, rep, {
        "allocation.all.allocated": 3,
        "allocation.all.freed": 3,
        "segment.all.allocated": 1,
        "num_device_alloc": 1,
        "allocated_bytes.all.allocated": 2 * MIB + 1024,
    })
    return c.finish([plain, pre])


def case_c_api(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
        c.eq("%s: done" % r.label, r.val("done"), 1)
    c.eq("plain: available", plain.val("available"), 0)
    c.eq("preload: available", pre.val("available"), 1)
    # 1000 -> 1024 and 3 MiB: allocated 3146752; reserved 2 MiB + 20 MiB segments.
    c.eq("memory_allocated", pre.val("allocated"), 1024 + 3 * MIB)
    c.eq("memory_reserved", pre.val("reserved"), 22 * MIB)
    c.eq("max_memory_allocated", pre.val("max_allocated"), 1024 + 3 * MIB)
    c.eq("max_memory_allocated after reset_peak (= current)", pre.val("max_allocated_after_reset"), 1024)
    try:
        stats = json.loads(pre.values.get("stats_json", ""))
        c.eq("memory_stats JSON keys", len(stats), 122)
        c.eq("memory_stats allocated_bytes.all.current", stats.get("allocated_bytes.all.current"), 1024)
    except ValueError as e:
        c.true("memory_stats is JSON", False, e)
    # empty_cache gives back the wholly free 20 MiB segment; a's 2 MiB segment stays.
    c.eq("memory_reserved after empty_cache", pre.val("reserved_after_empty_cache"), 2 * MIB)
    return c.finish([plain, pre])


def case_pool_off(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp, {"GPUMEMPROF_POOL": "0"})
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
    n = pre.val("program_mallocs")
    c.eq("program_mallocs", n, 6)
    c.eq("preload: sim cuMemAlloc_v2 ok == program mallocs", pre.sim_ok("cuMemAlloc_v2"), n)
    c.eq("preload: sim cuMemFree_v2 ok == program frees", pre.sim_ok("cuMemFree_v2"),
         pre.val("program_frees"))
    rep = pre.report()
    c.eq("pool", (rep or {}).get("pool"), "passthrough")
    check_stats(c, rep, {
        "allocation.all.allocated": 6,
        "allocation.all.freed": 6,
        "num_device_alloc": 6,
        "num_device_free": 6,
    })
    return c.finish([plain, pre])


def case_bad_config(args, tmp):
    c = Checker(args.case)
    plain, pre = both(args, tmp, {"GPUMEMPROF_ALLOC_CONF": "max_split_size_mb:abc"})
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
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
    return c.finish([plain, pre])


CASES = {
    "shared_cudart": lambda a, t: case_sequence(a, t, static=False),
    "static_cudart": lambda a, t: case_sequence(a, t, static=True),
    "driver_direct": case_driver_direct,
    "dlsym_lookup": case_dlsym_lookup,
    "passthrough_kinds": case_passthrough_kinds,
    "bad_free": case_bad_free,
    "oom": case_oom,
    "cross_stream_reuse": case_cross_stream_reuse,
    "mem_get_info": case_mem_get_info,
    "fork_child": case_fork_child,
    "c_api": case_c_api,
    "pool_off": case_pool_off,
    "bad_config": case_bad_config,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--lib", required=True, help="libgpumemprof.so")
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim-dir", required=True, help="directory holding the simulated libcuda.so.1")
    ap.add_argument("--keep", action="store_true", help="keep the output directory")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpumemprof-%s-" % args.case)
    try:
        return CASES[args.case](args, tmp)
    finally:
        if args.keep:
            print("outputs kept in " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
