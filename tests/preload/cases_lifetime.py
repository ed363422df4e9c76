# SPDX-License-Identifier: MIT
"""Preload cases about the process's life: fork children, frees in global destructors, the C
API, the dump signal, death by SIGTERM."""
import concurrent.futures
import glob
import json
import os
import signal
import subprocess
import time

from case_common import (MIB, Run, Checker, device_entry, report_text, stat, prog_env, collect, run_prog, both,
                         both_ran, check_stats, read_json)


def case_fork_child(args, tmp):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp)
    for r in (plain, pre):
        c.eq("%s: child exit status" % r.label, r.val("child_status"), 0)
    parent, child = pre.val("parent_pid"), pre.val("child_pid")
    # The child made no allocation of its own: it writes nothing (docs/guarantees.md).
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


def case_fault_after(args, tmp):
    """A kernel faults (the simulated driver's context turns sticky: CUDA_ERROR_ASSERT, 710, to
    every later call that uses it). Whether the program learns of it from a device or a stream
    synchronisation, a launch, a copy back to the host or a memset, its later frees and allocations answer
    710 under the preload as alone, though the pool could serve them without the driver; the exit
    status is the same and a report is still written. Without the pool (GPUMEMPROF_POOL=0) a free
    is the driver's own: when it is where the program first meets the fault, it answers 710 too
    (with the pool, that free is the limit "the pool does not synchronise", design.md)."""
    c = Checker(args.case)
    runs = []
    keys = ["sync", "malloc_small_after", "free_small", "free_large", "malloc_large_after", "mem_get_info",
            "last_error"]
    for notice in ("device", "stream", "launch", "copy", "copy_async", "memset", "memset_async", "free"):
        env = {"SIMCUDA_FAULTS": "cuLaunchKernel@1=sticky:710"}
        if notice == "free":
            env["GPUMEMPROF_POOL"] = "0"
        plain = run_prog(args, tmp, "plain-" + notice, False, env, argv=(notice,))
        pre = run_prog(args, tmp, "preload-" + notice, True, env, argv=(notice,))
        runs += [plain, pre]
        for k in keys:
            c.eq("%s alone: %s" % (notice, k), plain.val(k), 710)
            c.eq("%s preloaded: %s" % (notice, k), pre.val(k), 710)
        c.eq("%s: exit status alone" % notice, plain.rc, 3)
        c.eq("%s: exit status preloaded" % notice, pre.rc, 3)
        c.eq("%s: one report" % notice, len(pre.reports), 1)
        dev = device_entry(pre.report()) or {}
        c.eq("%s: the report's kernel_fault" % notice, dev.get("kernel_fault"), 710)
        c.true("%s: the .txt says a kernel faulted" % notice,
               "a kernel faulted (CUDA error 710)" in report_text(pre), report_text(pre)[-300:])
    return c.finish(runs)
