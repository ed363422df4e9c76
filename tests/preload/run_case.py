#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Run one preload case: the program once without and once with LD_PRELOAD=libgpumemprof.so against
# the simulated driver, then check its output, the simulated driver's call counts (SIMCUDA_LOG) and
# the profiler's exit JSON against values computed by hand from PyTorch's allocator rules.
import argparse
import concurrent.futures
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from exit_json import load_report  # noqa: E402

MIB = 1 << 20


class Run:
    def __init__(self, label, rc, stdout, stderr, reports, sim, out_dir=None):
        self.label, self.rc, self.stdout, self.stderr = label, rc, stdout, stderr
        self.out_dir = out_dir  # GPUMEMPROF_OUTPUT is <out_dir>/out-%p
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


def report_text(run):
    """The run's <prefix>.txt (one process), or ""."""
    files = glob.glob(os.path.join(run.out_dir, "out-*.txt"))
    return open(files[0]).read() if len(files) == 1 else ""


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


def model_stat(report, key, device=0):
    """A memory_stats key of the PyTorch-allocator model (devices[i].pytorch_model)."""
    d = device_entry(report, device)
    if d is None:
        return "<no devices[%d] entry>" % device
    return d.get("pytorch_model", {}).get("memory_stats", {}).get(key, "<missing %s>" % key)


def prog_env(args, out_dir, preload, extra_env=None):
    """The environment of one run: simulated driver first on the library path, outputs in out_dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEMPROF_", "SIMCUDA_"))}
    env.pop("LD_PRELOAD", None)
    lib_path = [os.path.abspath(args.sim_dir), os.path.dirname(os.path.abspath(args.prog))]
    if env.get("LD_LIBRARY_PATH"):
        lib_path.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = ":".join(lib_path)
    env["SIMCUDA_LOG"] = os.path.join(out_dir, "sim-%p.log")
    env["GPUMEMPROF_OUTPUT"] = os.path.join(out_dir, "out-%p")
    if preload:
        # An ASan-instrumented library (-Db_sanitize=address) needs the ASan runtime loaded first.
        env["LD_PRELOAD"] = " ".join(([args.asan_runtime] if args.asan_runtime else []) +
                                     [os.path.abspath(args.lib)])
    if args.case in NO_LEAK_CHECK:
        # Later flags win: this overrides a detect_leaks=1 from the caller.
        env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "detect_leaks=0") if x)
    env.update(extra_env or {})
    return env


# Cases whose processes LeakSanitizer must not check (builds with -Db_sanitize=address):
# fork_child: the child drops the parent's pools on purpose (Profiler::fork_child), which LSan
# reports as leaks; and LSan's exit-time check in a child forked while other threads (the
# simulated device's stream workers) run can deadlock on the allocator lock (seen with GCC 12).
NO_LEAK_CHECK = {"fork_child", "fork_child_alloc"}


def collect(out_dir):
    """The JSON reports and SIMCUDA_LOG records a run left in out_dir."""
    reports = []
    for path in sorted(glob.glob(os.path.join(out_dir, "out-*.json"))):
        try:
            reports.append(load_report(path))
        except (OSError, ValueError) as e:
            reports.append({"_error": "%s: %s" % (path, e)})
    sim = []
    for path in sorted(glob.glob(os.path.join(out_dir, "sim-*.log"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    sim.append(json.loads(line))
    return reports, sim


def run_prog(args, tmp, label, preload, extra_env=None, argv=()):
    out_dir = os.path.join(tmp, label)
    os.makedirs(out_dir)
    env = prog_env(args, out_dir, preload, extra_env)
    try:
        p = subprocess.run([args.prog, *argv], env=env, capture_output=True, text=True, timeout=120)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        so = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        se = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    reports, sim = collect(out_dir)
    return Run(label, rc, so, se, reports, sim, out_dir)


def both(args, tmp, extra_env=None):
    return (run_prog(args, tmp, "plain", False, extra_env),
            run_prog(args, tmp, "preload", True, extra_env))


def both_ran(c, args, tmp, extra_env=None):
    """both(), each run checked to exit with 0."""
    plain, pre = both(args, tmp, extra_env)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
    return plain, pre


def cli_replay(c, args, trace, label, conf=None):
    """`gpumemprof replay TRACE --json [--conf CONF]`, not preloaded: checked to exit with 0 and
    print JSON; returns that JSON ({} when it is not)."""
    cmd = [args.cli, "replay", trace, "--json"] + ([] if conf is None else ["--conf", conf])
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    c.eq("%s: exit code" % label, p.returncode, 0)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        c.true("%s: output is JSON" % label, False, "%s: %s" % (e, p.stdout[:300] + p.stderr[-300:]))
        return {}


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


def case_fork_child(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: child exit status" % r.label, r.val("child_status"), 0)
    parent, child = pre.val("parent_pid"), pre.val("child_pid")
    # The child made no allocation of its own: it writes nothing (docs/guarantees.md, issue 13).
    c.eq("preload: reports written (the parent's only)", len(pre.reports), 1)
    pids = [r.get("pid") for r in pre.reports]
    c.true("no report of the child", pre.report(child) is None, pids)
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


def case_fork_child_alloc(args, tmp):
    """A child forked after 200 allocations makes one of its own: its report lists that one."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: child exit status" % r.label, r.val("child_status"), 0)
    parent, child = pre.val("parent_pid"), pre.val("child_pid")
    c.eq("preload: reports written (parent and child)", len(pre.reports), 2)
    crep, prep = pre.report(child) or {}, pre.report(parent) or {}

    def innermost(site):  # "(anonymous namespace)::child_alloc(unsigned long) [clone .isra.0]" -> child_alloc
        fn = site["frames"][-1]["function"] if site.get("frames") else ""
        return next((n for n in ("child_alloc", "parent_alloc") if "::%s(" % n in fn), fn)

    csites = [s for s in crep.get("sites", []) if s["total_count"] > 0]
    c.eq("child: call sites with allocations", [(innermost(s), s["total_count"], s["total_bytes"]) for s in csites],
         [("child_alloc", 1, 3 * MIB)])
    c.eq("child: leaks at exit (bytes, blocks)", ((crep.get("leaks") or {}).get("bytes"),
                                                   (crep.get("leaks") or {}).get("count")), (3 * MIB, 1))
    c.eq("child: peak of live bytes", (crep.get("peak") or {}).get("bytes"), 3 * MIB)
    c.eq("child: captures", (crep.get("stacks") or {}).get("captures"), 1)
    psites = [s for s in prep.get("sites", []) if s["total_count"] > 0]
    c.eq("parent: call sites with allocations", [(innermost(s), s["total_count"], s["total_bytes"]) for s in psites],
         [("parent_alloc", 200, 200 * 64 * 1024)])
    c.eq("parent: leaks at exit", (prep.get("leaks") or {}).get("bytes"), 0)
    c.eq("parent: peak of live bytes", (prep.get("peak") or {}).get("bytes"), 200 * 64 * 1024)
    # The child inherits the parent's SIGUSR2 handler, which is ours: it keeps it, and says so.
    for who, rep in (("parent", prep), ("child", crep)):
        c.eq("%s: dump signal SIGUSR2 installed" % who, rep.get("dump_signal"), {"signal": 12, "installed": True})
    c.true("no warning that the program handles SIGUSR2", "is not taken" not in pre.stderr, pre.stderr[-800:])
    return c.finish([plain, pre])


def case_dtor_free(args, tmp):
    """Blocks a library's global destructor frees at exit are no leaks; main's unfreed block is."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: the library's destructor freed its 10 blocks" % r.label,
             (r.val("dtor_frees"), r.val("dtor_bad")), (10, 0))
    rep = pre.report() or {}
    leaks = rep.get("leaks") or {}
    c.eq("leaks at exit: main's 1 MiB block only (bytes, blocks)", (leaks.get("bytes"), leaks.get("count")),
         (MIB, 1))
    leaked = [s for s in rep.get("sites", []) if s["live_bytes"] > 0]
    c.eq("one call site holds live bytes, main's", [(s["frames"][-1]["function"] if s["frames"] else None,
                                                    s["live_bytes"]) for s in leaked], [("main", MIB)])
    lib_site = [s for s in rep.get("sites", []) if s["total_count"] == 10]
    c.eq("the library's site: 10 blocks allocated, none live", [(s["live_count"], s["live_bytes"]) for s in lib_site],
         [(0, 0)])
    c.eq("memory_stats: allocations freed (the 10 included)", stat(rep, "allocation.all.freed"), 10)
    text = report_text(pre)
    c.true("the text report's leak section says when it was taken", "after the program's exit handlers and the global" in text,
           [l for l in text.splitlines() if "Leak" in l])
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


def case_c_api(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
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
    need = len(pre.values.get("stats_json", "")) + 1
    c.eq("memory_stats(-1, buf, 1): the size the text needs", pre.val("stats_size1_ret"), need)
    c.eq("memory_stats(-1, buf, 1): writes the NUL", pre.val("stats_size1_nul"), 1)
    c.eq("memory_stats(-7, ...): an error (0)", pre.val("stats_bad_device_ret"), 0)
    c.eq("memory_stats(-7, ...): an empty string", pre.val("stats_bad_device_nul"), 1)
    c.eq("memory_allocated(-7): an error (-1), not the current device", pre.val("allocated_bad_device"), -1)
    # gpumemprof_snapshot_json while a (1000 B) and b (3 MiB) are live.
    try:
        snap = json.loads(pre.values.get("snapshot_json", ""))
        segs = sorted(snap.get("segments", []), key=lambda s: s["total_size"])
        c.eq("snapshot: segments (size, type)", [(s["total_size"], s["segment_type"]) for s in segs],
             [(2 * MIB, "small"), (20 * MIB, "large")])
        active = [(b["size"], b["requested_size"], b["state"]) for s in segs for b in s["blocks"]
                  if b["state"] != "inactive"]
        c.eq("snapshot: live blocks", active, [(1024, 1000, "active_allocated"), (3 * MIB, 3 * MIB, "active_allocated")])
        frames = [b["frames"] for s in segs for b in s["blocks"] if b["state"] != "inactive"]
        c.true("snapshot: each live block's innermost frame is main in prog_c_api.cpp",
               all(f and f[0]["name"] == "main" and f[0]["filename"].endswith("prog_c_api.cpp") for f in frames), frames)
        trace = snap.get("device_traces", [[]])[0]
        c.eq("snapshot: device trace", [(e["action"], e["size"]) for e in trace],
             [("segment_alloc", 2 * MIB), ("alloc", 1000), ("segment_alloc", 20 * MIB), ("alloc", 3 * MIB)])
    except (ValueError, KeyError, IndexError) as e:
        c.true("snapshot_json is the snapshot as JSON", False, e)
    # The HTML report's time series: one empty_cache marker of the 20 MiB it gave back; afterwards
    # the pool and the PyTorch model both reserve a's 2 MiB segment (the later small blocks fit in it).
    pages = glob.glob(os.path.join(pre.out_dir, "out-*.html"))
    try:
        text = open(pages[0], encoding="utf-8").read()
        data = json.loads(text.split('<script type="application/json" id="data">')[1].split("</script>")[0])
        dev = data["devices"][0]
        c.eq("html: empty_cache markers (kind, bytes)", [(m[0], m[2]) for m in dev["markers"]],
             [("empty_cache", 20 * MIB)])
        c.eq("html: reserved and model reserved at the end",
             (dev["series"]["reserved"]["last"][-1], dev["series"]["model_reserved"]["last"][-1]), (2 * MIB, 2 * MIB))
    except (IndexError, ValueError, KeyError) as e:
        c.true("html report with its data", False, (pages, e))
    # empty_cache gives back the wholly free 20 MiB segment; a's 2 MiB segment stays.
    c.eq("memory_reserved after empty_cache", pre.val("reserved_after_empty_cache"), 2 * MIB)
    # gpumemprof_set_stack_depth: returns the previous depth; -1 only reads it.
    c.eq("stack depth by default", pre.val("depth_default"), 64)
    c.eq("set_stack_depth(0) returns the previous depth", pre.val("depth_before_off"), 64)
    c.eq("depth while off", pre.val("depth_while_off"), 0)
    c.eq("set_stack_depth(8) returns 0", pre.val("depth_before_on"), 0)
    c.eq("depth after", pre.val("depth_after_on"), 8)
    rep = pre.reports[-1] if pre.reports else {}
    sites = rep.get("sites", [])
    unstacked = [s for s in sites if not s["frames"]]
    c.eq("one site without a stack (the allocation made with capture off)", len(unstacked), 1)
    if unstacked:
        c.eq("it holds that 5000 B (5120 B) block, freed", (unstacked[0]["total_bytes"], unstacked[0]["live_bytes"]),
             (5120, 0))
    leaked = [s for s in sites if s["live_bytes"] == 7168]
    c.eq("the 7000 B block allocated after capture came back is a leak with a stack", len(leaked), 1)
    if leaked:
        frames = leaked[0]["frames"]
        # JSON frames run outermost first: the innermost (the caller of cudaMalloc) is last.
        c.true("its stack is at most 8 frames and its innermost frame is main in prog_c_api.cpp",
               0 < len(frames) <= 8 and frames[-1]["function"] == "main"
               and frames[-1]["file"].endswith("prog_c_api.cpp"), frames[-2:])
    c.eq("leaks at exit: the 7168 B block", rep.get("leaks", {}).get("bytes"), 7168)
    c.eq("captures counted: a, b and the one after capture came back", rep.get("stacks", {}).get("captures"), 3)
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
    # The memory the reset dropped is not live any more (issue 14.8): a (1 MiB) died with the old
    # context before c (5 MiB) was made, so at most 5 MiB were ever live at once, none at exit.
    c.eq("preload: process-wide peak of live bytes", (rep.get("peak") or {}).get("bytes"), 5 * MIB)
    c.eq("preload: leaks at exit (bytes)", (rep.get("leaks") or {}).get("bytes"), 0)
    return c.finish([plain, pre])


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"_error": "%s: %s" % (path, e)}


def case_signal_dump(args, tmp):
    c = Checker(args.case)
    # Preload only: without the profiler SIGUSR2 would end the program (default action).
    pre = run_prog(args, tmp, "preload", True)
    c.eq("preload: exit code (normal exit after the dump)", pre.rc, 0)
    c.eq("preload: <prefix>.json appeared within 2 s of SIGUSR2", pre.val("dump_seen"), 1)
    c.eq("preload: ran on after the dump", pre.val("survived"), 1)
    copies = glob.glob(os.path.join(pre.out_dir, "out-*.dump-copy"))
    c.eq("dump copy written by the program", len(copies), 1)
    if copies:
        # At the dump: a (1000 -> 1024) and b (3 MiB) live: 1024 + 3145728 = 3146752 bytes.
        check_stats(c, read_json(copies[0]), {
            "allocation.all.allocated": 2,
            "allocation.all.current": 2,
            "allocated_bytes.all.current": 3146752,
        }, prefix="dump memory_stats")
    c.eq("one JSON report", len(pre.reports), 1)
    # At exit (overwriting the dump): c (2000 -> 2048) as well, everything freed.
    check_stats(c, pre.report(), {
        "allocation.all.allocated": 3,
        "allocation.all.freed": 3,
        "allocated_bytes.all.allocated": 1024 + 3 * MIB + 2048,
    }, prefix="exit memory_stats")
    c.eq("text report present", len(glob.glob(os.path.join(pre.out_dir, "out-*.txt"))), 1)
    return c.finish([pre])


def run_killed(args, tmp, label, preload):
    """Start the program, wait for its ready=1 line, send SIGTERM, wait for it to die."""
    out_dir = os.path.join(tmp, label)
    os.makedirs(out_dir)
    env = prog_env(args, out_dir, preload)
    p = subprocess.Popen([args.prog], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip() == "ready=1":
            p.send_signal(signal.SIGTERM)
            break
    sent = time.monotonic()
    try:
        so, se = p.communicate(timeout=60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        so, se = p.communicate()
        rc = "timeout"
    reports, sim = collect(out_dir)
    run = Run(label, rc, "".join(lines) + so, se, reports, sim, out_dir)
    run.elapsed = time.monotonic() - sent
    return run


def case_sigterm(args, tmp):
    c = Checker(args.case)
    plain = run_killed(args, tmp, "plain", False)
    pre = run_killed(args, tmp, "preload", True)
    for r in (plain, pre):
        c.eq("%s: allocated before the signal" % r.label, r.val("ready"), 1)
        c.eq("%s: died by SIGTERM" % r.label, r.rc, -signal.SIGTERM)
        c.eq("%s: did not outlive the signal" % r.label, r.val("not_killed"), None)
    c.eq("preload: <prefix>.json written", len(pre.reports), 1)
    c.eq("preload: <prefix>.txt written", len(glob.glob(os.path.join(pre.out_dir, "out-*.txt"))), 1)
    # Live at the signal: 1000 -> 1024 and 3 MiB: 3146752 bytes in 2 blocks.
    check_stats(c, pre.report(), {
        "allocation.all.allocated": 2,
        "allocation.all.current": 2,
        "allocated_bytes.all.current": 1024 + 3 * MIB,
    })
    # A burst: the signal lands at every moment of the profiler's start-up, including the instant
    # the report thread is born (it once inherited an unblocked SIGTERM, took the signal itself and
    # waited 5 s for its own reports: about 1 run in 9 with 8 programs at once on 2 cores).
    burst = 48
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        runs = list(ex.map(lambda i: run_killed(args, tmp, "burst-%d" % i, True), range(burst)))
    c.eq("burst: runs that died by SIGTERM", sum(r.rc == -signal.SIGTERM for r in runs), burst)
    c.eq("burst: runs that wrote their report", sum(len(r.reports) == 1 for r in runs), burst)
    slow = [r.elapsed for r in runs if r.elapsed > 2.5]
    c.eq("burst: runs that took over 2.5 s from signal to death", len(slow), 0)
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


def case_fenced_replay(args, tmp):
    """Issue 12: a run whose freed blocks waited for fences (a non-blocking stream exists; events
    complete 2 ms after they are recorded, so the pool waits and grows) replays to its own
    figures: the trace says where each block became reusable (free_completed)."""
    c = Checker(args.case)
    keys = ("reserved_bytes.all.peak", "allocated_bytes.all.peak", "requested_bytes.all.peak",
            "active_bytes.all.peak", "num_device_alloc", "num_device_free", "allocation.all.allocated",
            "segment.all.peak")
    for run in range(2):
        trace = os.path.join(tmp, "fenced%d.gmt" % run)
        pre = run_prog(args, tmp, "preload%d" % run, True,
                       {"GPUMEMPROF_TRACE": trace, "SIMCUDA_EVENT_DELAY_US": "2000"})
        c.eq("run %d: exit code" % run, pre.rc, 0)
        rep = pre.report()
        # The program never holds more than one block: (96 + 1) pages at most.
        c.eq("run %d: allocated peak, one block at a time" % run, stat(rep, "allocated_bytes.all.peak"), 97 * 4096)
        c.ge("run %d: frees that waited for a fence" % run, rep["devices"][0]["pool_counters"]["deferred_frees"], 900)
        replay = cli_replay(c, args, trace, "run %d: gpumemprof replay --json" % run)
        for key in keys:
            c.eq("run %d: replay %s == the run's" % (run, key), stat(replay, key), stat(rep, key))
    return c.finish([pre])


# PyTorch's reserved peak for prog_trailing_loop, by hand: 4 x 30 MiB parameters (segments of
# exactly 30 MiB) = 120 MiB; forward: 8 x 24 MiB segments = 192 MiB, 8 x 6.5 MiB in 20 MiB
# segments (3 fit in one: 6.5 + 6.5 + the last 7 MiB unsplit) = 3 x 20 MiB, 8 x 96 KiB in one
# 2 MiB small segment: 374 MiB; backward: the first 48 MiB temporary needs a 48 MiB segment
# (422 MiB), later ones reuse it, and later steps reuse everything.
TRAILING_MODEL_RESERVED = (120 + 192 + 60 + 2 + 48) * MIB


def case_trailing_device(args, tmp):
    """Issue 9: the device trails the host by a full step (events complete 5 ms after they are
    recorded; the program's step is 5 ms of host time). The pool's reserved peak against PyTorch's
    allocator on the same requests (the model), by value, without and with a live non-blocking
    stream."""
    c = Checker(args.case)
    runs = []
    for label, argv in (("one_order", ()), ("side_stream", ("stream",))):
        r = run_prog(args, tmp, label, True, {"SIMCUDA_EVENT_DELAY_US": "5000", "GPUMEMPROF_MODEL": "1",
                                              "GPUMEMPROF_STACK_DEPTH": "0"}, argv)
        runs.append(r)
        c.eq("%s: exit code" % label, r.rc, 0)
        rep = r.report()
        dev = rep["devices"][0]
        ours, model = stat(rep, "reserved_bytes.all.peak"), model_stat(rep, "reserved_bytes.all.peak")
        c.true("%s: pool reserved peak %s <= 1.10 x the model's %s" % (label, ours, model),
               ours is not None and model and ours <= 1.10 * model)
        # By hand: 4 x 30 MiB parameters; per layer a 24 MiB and a 6.5 MiB activation (each in a
        # 24 MiB / 20 MiB segment of its own at the forward peak), 96 KiB in the small pool; the
        # backward's 48 MiB temporaries reuse freed activations' room only once merged.
        c.eq("%s: the model's reserved peak" % label, model, TRAILING_MODEL_RESERVED)
        c.eq("%s: allocated peak (the program's)" % label, stat(rep, "allocated_bytes.all.peak"),
             model_stat(rep, "allocated_bytes.all.peak"))
        if label == "one_order":
            c.eq("one_order: no free waited (reuse at once)", dev["pool_counters"]["deferred_frees"], 0)
        else:
            c.ge("side_stream: frees waited for fences", dev["pool_counters"]["deferred_frees"], 400)
            c.eq("side_stream: no wait ran out of time", dev["pool_counters"]["wait_timeouts"], 0)
    return c.finish(runs)


def case_trace_replay(args, tmp):
    c = Checker(args.case)
    trace = os.path.join(tmp, "alloc_sequence.gmt")
    pre = run_prog(args, tmp, "preload", True, {"GPUMEMPROF_TRACE": trace})
    c.eq("preload: exit code", pre.rc, 0)
    c.true("trace file written", os.path.exists(trace))
    check_stats(c, pre.report(), {k: SEQUENCE_STATS[k] for k in ("allocated_bytes.all.peak",
                                                                  "reserved_bytes.all.peak")})
    replay = cli_replay(c, args, trace, "gpumemprof replay --json")
    # The replay re-runs the recorded requests through the same policy: the peaks must be the
    # recorded process's exactly (33555456 and 50331648, worked out above SEQUENCE_STATS).
    for key in ("allocated_bytes.all.peak", "reserved_bytes.all.peak"):
        c.eq("replay %s == the run's JSON" % key, stat(replay, key), stat(pre.report(), key))
        c.eq("replay %s (by hand)" % key, stat(replay, key), SEQUENCE_STATS[key])
    return c.finish([pre])


CASES = {
    "shared_cudart": lambda a, t: case_sequence(a, t, static=False),
    "static_cudart": lambda a, t: case_sequence(a, t, static=True),
    "driver_direct": case_driver_direct,
    "dlsym_lookup": case_dlsym_lookup,
    "hook_doors": case_hook_doors,
    "passthrough_kinds": case_passthrough_kinds,
    "bad_free": case_bad_free,
    "oom": case_oom,
    "cross_stream_reuse": case_cross_stream_reuse,
    "mem_get_info": case_mem_get_info,
    "fork_child": case_fork_child,
    "dlclose_reuse": case_dlclose_reuse,
    "dtor_free": case_dtor_free,
    "fork_child_alloc": case_fork_child_alloc,
    "c_api": case_c_api,
    "pool_off": case_pool_off,
    "bad_config": case_bad_config,
    "early_ctor": case_early_ctor,
    "entry_point_shared": case_entry_point,
    "entry_point_static": case_entry_point,
    "ipc": case_ipc,
    "capture": case_capture,
    "device_reset": case_device_reset,
    "signal_dump": case_signal_dump,
    "sigterm": case_sigterm,
    "library_stream": case_library_stream,
    "trace_replay": case_trace_replay,
    "fenced_replay": case_fenced_replay,
    "trailing_device": case_trailing_device,
    "expandable": case_expandable,
}


def run_in_tmp(args, cases, prefix):
    """cases[args.case](args, tmp) in a new temporary folder, removed afterwards unless --keep."""
    tmp = tempfile.mkdtemp(prefix="%s-%s-" % (prefix, args.case))
    try:
        return cases[args.case](args, tmp)
    finally:
        if args.keep:
            print("outputs kept in " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--lib", required=True, help="libgpumemprof.so")
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim-dir", required=True, help="directory holding the simulated libcuda.so.1")
    ap.add_argument("--cli", help="the gpumemprof command-line tool (case trace_replay)")
    ap.add_argument("--asan-runtime", default="",
                    help="ASan runtime to preload before the library (builds with -Db_sanitize=address)")
    ap.add_argument("--keep", action="store_true", help="keep the output directory")
    args = ap.parse_args()
    return run_in_tmp(args, CASES, "gpumemprof")


if __name__ == "__main__":
    sys.exit(main())
