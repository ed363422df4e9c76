# SPDX-License-Identifier: MIT
"""Preload cases with PyTorch's own caching allocator attached (GPUMEMPROF_TORCH): the program
allocates through a stand-in with torch 2.11's interface (tests/preload/torch/lib) and once
itself; run with and without the preload."""
import glob
import json
import os
import re

from case_common import MIB, Checker, both_ran, cli_replay, report_text


def marker_lines(source):
    """{"LINE_A": 31, ...}: the lines of the program marked // LINE_X."""
    lines = {}
    with open(source, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            m = re.search(r"// (LINE_\w+)", text)
            if m:
                lines[m.group(1)] = n
    return lines


def entries(report, allocator):
    return [d for d in (report or {}).get("devices", []) if d.get("allocator") == allocator]


def site_at(report, file_name, line):
    """The call sites with a frame at file_name:line."""
    return [s for s in (report or {}).get("sites", [])
            if any(f.get("file", "").endswith(file_name) and f.get("line") == line for f in s.get("frames", []))]


def case_torch_attach(args, tmp):
    """PyTorch's allocator keeps its pool: its segments pass through unchanged, its blocks are
    rebuilt from its events (on the profiler's own thread) with the same 122 statistics it
    reports itself, and the program's own cudaMalloc is served by our pool beside it."""
    return torch_attach_checks(args, tmp, thread=True)


def case_torch_pluggable(args, tmp):
    """PyTorch's first allocation goes to a MemPool whose segments the program's own allocator
    makes (cudaMalloc from the program's function, called by PyTorch's allocator): that call is
    PyTorch's (passed through, not pooled by us), the profiler attaches inside it, before the
    first event, and every event fits."""
    return torch_pluggable_checks(args, tmp, "plain")


def case_torch_pluggable_async(args, tmp):
    """The same with a MemPool allocator that takes stream-ordered memory (cudaMallocAsync): the
    segment is PyTorch's private pool's, counted once (not also as stream-ordered memory)."""
    return torch_pluggable_checks(args, tmp, "async")


def case_torch_pluggable_managed(args, tmp):
    """The same with managed memory (cudaMallocManaged): the segment is PyTorch's, and, as any
    managed memory, not counted as device memory by the split (whose unexplained part says
    managed memory was used)."""
    return torch_pluggable_checks(args, tmp, "managed")


def case_torch_async_backend(args, tmp):
    """PyTorch's backend:cudaMallocAsync takes stream-ordered memory straight from libc10_cuda.so:
    its caching allocator is not in use, so nothing is attached, and the memory is the program's
    stream-ordered memory (PyTorch keeps no statistics of its own there)."""
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, None, ["backend"])
    c.eq("the tensor was made, with and without the preload", [plain.val("backend_tensor"), pre.val("backend_tensor")],
         [1, 1])
    rep = pre.report() or {}
    c.eq("no devices entry attached to PyTorch's caching allocator",
         [t.get("allocator_status") for t in entries(rep, "pytorch") if "attached to" in t.get("allocator_status", "")],
         [])
    pt = next((d.get("passthrough", {}) for d in rep.get("devices", []) if "passthrough" in d), {})
    c.eq("passthrough.async: the tensor (calls, frees, peak MiB)",
         [(pt.get("async") or {}).get(k) for k in ("calls", "frees")] + [(pt.get("async") or {}).get("peak_bytes", 0)
                                                                          // MIB], [1, 1, 6])
    c.true("no gpumemprof warning", "gpumemprof: warning" not in pre.stderr, pre.stderr[-1500:])
    return c.finish([plain, pre])


def torch_pluggable_checks(args, tmp, memory):
    c = Checker(args.case)
    plain, pre = both_ran(c, args, tmp, None, [] if memory == "plain" else [memory])
    for k in ("TORCH_STATS", "TORCH_STATS_END"):
        c.eq("stdout: the stand-in's own %s, same with and without the preload" % k, pre.values.get(k),
             plain.values.get(k))
    c.eq("the program's allocator made and released the pool's one segment",
         [pre.val("program_alloc"), pre.val("program_release")], [1, 1])
    # The pool's 20 MiB segment (for 6 MiB) and the default pool's 20 MiB (for 3 MiB), each from
    # the driver as without us.
    made = {"plain": "cuMemAlloc_v2", "async": "cuMemAllocAsync", "managed": "cuMemAllocManaged"}[memory]
    c.eq("driver calls that made the segments, with and without the preload",
         [(plain.sim_ok("cuMemAlloc_v2"), plain.sim_ok(made)), (pre.sim_ok("cuMemAlloc_v2"), pre.sim_ok(made))],
         [(2, 2) if memory == "plain" else (1, 1)] * 2)
    rep = pre.report() or {}
    torch = entries(rep, "pytorch")
    c.eq("one devices entry for PyTorch's allocator", len(torch), 1)
    if not torch:
        return c.finish([plain, pre])
    t = torch[0]
    c.true("attached", t.get("allocator_status", "").startswith("attached to PyTorch 2.11.0+sim"),
           t.get("allocator_status"))
    c.eq("events that did not fit the rebuilt layout", t.get("mirror_mismatches"), 0)
    c.eq("at exit our keys equal the stand-in's own", (t.get("pytorch_check") or {}).get("differing_keys"), {})
    during = json.loads(pre.values.get("TORCH_STATS") or "{}")
    c.eq("the stand-in's segments at the peak: 2 (the pool's and the default pool's)",
         during.get("segment.all.peak"), 2)
    c.eq("PyTorch's private pool (0, 7): its 20 MiB at the peak",
         [(p.get("id"), p.get("peak_reserved_bytes")) for p in t.get("private_pools", [])], [([0, 7], 20 * MIB)])
    ours = entries(rep, "gpumemprof")
    c.eq("our pool served nothing (reserved_bytes.all.peak)",
         [o.get("memory_stats", {}).get("reserved_bytes.all.peak") for o in ours], [0] * len(ours))
    acc = next((d["device_accounting"] for d in rep.get("devices", []) if "device_accounting" in d), {})
    split = {k: v // MIB for k, v in acc.get("buckets", {}).items()}
    private = "PyTorch's private pools (CUDA graphs, MemPool)"
    if memory == "managed":
        # The simulated driver counts managed memory as used at once (a real one as its pages
        # move to the device): in the unexplained part, as the program's own managed memory.
        c.eq("the peak's split (MiB): the managed segment not as device memory, nothing twice",
             (split.get(private), split.get("stream-ordered (cudaMallocAsync, memory pools)"),
              acc.get("unexplained_bytes"), acc.get("managed_used")), (None, None, 20 * MIB, True))
    else:
        c.eq("the peak's split (MiB): the pool's segment once, as PyTorch's",
             (split.get(private), split.get("stream-ordered (cudaMallocAsync, memory pools)"),
              acc.get("unexplained_bytes")), (20, None, 0))
    c.eq("passthrough: none of PyTorch's segments counted as the program's",
         {k: (v or {}).get("calls") for k, v in next((d.get("passthrough", {}) for d in rep.get("devices", [])
                                                      if "passthrough" in d), {}).items()
          if k in ("async", "managed")}, {"async": 0, "managed": 0})
    c.true("no gpumemprof warning", "gpumemprof: warning" not in pre.stderr, pre.stderr[-1500:])
    return c.finish([plain, pre])


def case_torch_attach_inline(args, tmp):
    """The same with GPUMEMPROF_TORCH_THREAD=0: each event handled on the thread that made it."""
    return torch_attach_checks(args, tmp, thread=False)


def torch_attach_checks(args, tmp, thread):
    c = Checker(args.case)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prog_torch_attach.cpp")
    lines = marker_lines(src)
    plain, pre = both_ran(c, args, tmp, None if thread else {"GPUMEMPROF_TORCH_THREAD": "0"})
    c.eq("stdout: the stand-in's own stats, same with and without the preload",
         pre.values.get("TORCH_STATS"), plain.values.get("TORCH_STATS"))
    c.eq("stdout: distinct blocks", pre.val("distinct"), 1)
    # The stand-in's segments are cudaMalloc'd as they would be without us (nothing pooled, same
    # sizes): 2 MiB small, 20 MiB for the 5 MiB block, 30 MiB, 20 MiB for the other stream, 20 MiB
    # for the private pool; plus the program's own 4 MiB, which our pool serves from a 20 MiB
    # segment of its own.
    # and 2 MiB again after empty_cache, for the 600 KiB block.
    c.eq("driver cuMemAlloc_v2 calls without the preload", plain.sim_ok("cuMemAlloc_v2"), 7)
    c.eq("driver cuMemAlloc_v2 calls with the preload", pre.sim_ok("cuMemAlloc_v2"), 7)
    rep = pre.report()
    torch = entries(rep, "pytorch")
    c.eq("one devices entry for PyTorch's allocator", len(torch), 1)
    if not torch:
        return c.finish([plain, pre])
    t = torch[0]
    c.true("attached to the stand-in's version", t.get("allocator_status", "").startswith(
        "attached to PyTorch 2.11.0+sim"), t.get("allocator_status"))
    c.eq("events that did not fit the rebuilt layout", t.get("mirror_mismatches"), 0)
    # What handling the events cost is counted over every one of them: 6 ALLOC, 3 FREE_REQUESTED
    # and 3 FREE_COMPLETED (a, b, e), 6 SEGMENT_ALLOC (2 MiB, 20 MiB for b, 30 MiB, 20 MiB on the
    # other stream, 20 MiB in the private pool, 2 MiB for e) and 2 SEGMENT_FREE (empty_cache).
    cost = (rep or {}).get("stacks", {}).get("torch_events", {})
    c.eq("stacks.torch_events.events: every event the stand-in made", cost.get("events"), 20)
    parts = sum(cost.get(k, 0) for k in ("stacks_seconds", "backward_seconds", "traits_seconds", "kinds_seconds",
                                         "mirror_seconds", "handover_seconds"))
    wholes = cost.get("seconds", 0) + cost.get("deferred_seconds", 0)
    c.true("stacks.torch_events: some time, its parts within the wholes",
           0 < cost.get("seconds", 0) < 1 and 0 <= parts <= wholes, cost)
    # The 12 ALLOC / FREE_REQUESTED / FREE_COMPLETED go to the profiler's thread; segments do not.
    c.eq("stacks.torch_events.deferred_events", cost.get("deferred_events"), 12 if thread else 0)
    c.true(".txt: the events' cost line", "PyTorch allocator events: 20, " in report_text(pre), "")
    c.eq(".txt: the cost line names the profiler's thread when it ran",
         "to the profiler's thread" in report_text(pre), thread)
    before = json.loads(pre.values.get("TORCH_STATS") or "{}")
    # Asked through the C API right after the frees (before the program's own cudaFree): a, c, d
    # and g were allocated, a freed; the peak held a, b and c (b freed before d), or c, d and g.
    c.eq("C API memory_allocated right after the events: c + d + g",
         pre.val("OURS_ALLOCATED"), 30 * MIB + 3 * MIB + 2 * MIB)
    c.eq("C API max_memory_allocated = the stand-in's peak", pre.val("OURS_MAX_ALLOCATED"),
         before.get("allocated_bytes.all.peak"))
    theirs = json.loads(pre.values.get("TORCH_STATS_END") or "{}")
    ours = t.get("memory_stats", {})
    c.eq("122 keys", len(ours), 122)
    differing = {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
    c.eq("memory_stats equal the stand-in's own at exit, key by key (ours, theirs)", differing, {})
    # By hand: c (30 MiB, a segment of its own), d (3 MiB on stream 0x100), g (2 MiB, private pool)
    # live; empty_cache gave back the free 2 MiB and 20 MiB segments, e took a new 2 MiB one.
    c.eq("allocated_bytes.all.current", ours.get("allocated_bytes.all.current"), 30 * MIB + 3 * MIB + 2 * MIB)
    c.eq("reserved_bytes.all.current", ours.get("reserved_bytes.all.current"), (30 + 20 + 20 + 2) * MIB)
    # The program reset the peaks before e: memory_stats follows, as torch.cuda.memory_stats() does;
    # the whole run's peak is kept beside it.
    c.eq("program resets seen", t.get("program_resets"), 1)
    c.eq("allocated_bytes.all.peak after the reset", ours.get("allocated_bytes.all.peak"), 35 * MIB + 600 * 1024)
    whole = t.get("whole_run_memory_stats", {})
    c.eq("whole run: allocated_bytes.all.peak (reached after the reset)", whole.get("allocated_bytes.all.peak"),
         35 * MIB + 600 * 1024)
    c.eq("whole run: inactive_split_bytes.all.peak (reached before the reset)",
         whole.get("inactive_split_bytes.all.peak"), before.get("inactive_split_bytes.all.peak"))
    c.true("... which the reset took out of memory_stats", ours.get("inactive_split_bytes.all.peak", 0) <
           before.get("inactive_split_bytes.all.peak", 0), ours.get("inactive_split_bytes.all.peak"))
    c.eq("num_sync_all_streams (empty_cache, no event shows it)", ours.get("num_sync_all_streams"),
         theirs.get("num_sync_all_streams"))
    check = t.get("pytorch_check", {})
    c.eq("PyTorch's own figures read at exit, none differing", check.get("differing_keys"), {})
    c.eq("PyTorch's own allocated bytes at exit", check.get("memory_stats", {}).get(
        "allocated_bytes.all.current"), 35 * MIB)
    # empty_cache gave back the two wholly free segments (without the preload the program's own
    # cudaFree is a third call; under it, our pool keeps that block cached).
    c.eq("driver: segments freed (without, with the preload)", (plain.sim_ok("cuMemFree_v2"), pre.sim_ok("cuMemFree_v2")),
         (3, 2))
    pools = t.get("private_pools", [])
    c.eq("private pools (id, reserved, allocated)",
         [(p["id"], p["reserved_bytes"], p["allocated_bytes"]) for p in pools], [([1, 0], 20 * MIB, 2 * MIB)])
    mine = entries(rep, "gpumemprof")
    c.eq("our pool beside it: one entry", len(mine), 1)
    if mine:
        st = mine[0].get("memory_stats", {})
        c.eq("our pool served the program's own cudaMalloc only", st.get("allocation.all.allocated"), 1)
        c.eq("... of 4 MiB", st.get("allocated_bytes.all.allocated"), 4 * MIB)
    # Call sites: the program's lines, each with its block's bytes.
    for name, live in (("LINE_C", 30 * MIB), ("LINE_D", 3 * MIB), ("LINE_G", 2 * MIB)):
        s = site_at(rep, "prog_torch_attach.cpp", lines[name])
        c.eq("site %s: live bytes at exit" % name, [x["live_bytes"] for x in s], [live])
    s = site_at(rep, "prog_torch_attach.cpp", lines["LINE_A"])
    c.eq("site LINE_A: 1024 B allocated, freed", [(x["total_bytes"], x["live_bytes"]) for x in s], [(1024, 0)])
    c.eq("leaks at exit: PyTorch's three live blocks", ((rep or {}).get("leaks") or {}).get("bytes"), 35 * MIB)
    c.true("the environment is left alone (PyTorch keeps its allocator)",
           "PYTORCH_NO_CUDA_MEMORY_CACHING=1" not in (rep or {}).get("framework_env", []), rep.get("framework_env"))
    return c.finish([plain, pre])


def case_torch_trace(args, tmp):
    """The trace of an attached run holds PyTorch's own events, with their streams and pools:
    `gpumemprof replay` reproduces the stand-in's peaks and its cudaMalloc count."""
    c = Checker(args.case)
    trace = os.path.join(tmp, "run.gmt")
    plain, pre = both_ran(c, args, tmp, {"GPUMEMPROF_TRACE": trace})
    theirs = json.loads(pre.values.get("TORCH_STATS") or "{}")
    end = json.loads(pre.values.get("TORCH_STATS_END") or "{}")
    replayed = cli_replay(c, args, trace, "replay")
    st = replayed.get("memory_stats") or (replayed.get("devices") or [{}])[0].get("memory_stats", {})
    c.eq("replayed peak reserved = the stand-in's", st.get("reserved_bytes.all.peak"), theirs.get("reserved_bytes.all.peak"))
    c.eq("replayed peak allocated = the stand-in's (whole run)", st.get("allocated_bytes.all.peak"),
         max(theirs.get("allocated_bytes.all.peak", 0), end.get("allocated_bytes.all.peak", 0)))
    c.eq("replayed cudaMalloc count = the stand-in's", st.get("num_device_alloc"), end.get("num_device_alloc"))
    # a, b, c, d, g and e: the stand-in's six; the program's own cudaMalloc (our pool's) is not in it.
    c.eq("replayed allocations: PyTorch's six only", st.get("allocation.all.allocated"), 6)
    return c.finish([plain, pre])


def case_torch_autograd(args, tmp):
    """A backward allocation is charged to the forward line that made its node; the kinds of
    memory at the peak follow the rules (core/memory_categories.hpp), checked by hand."""
    c = Checker(args.case)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prog_torch_autograd.cpp")
    lines = marker_lines(src)
    plain, pre = both_ran(c, args, tmp)
    c.eq("stdout: the same", pre.values, plain.values)
    rep = pre.report() or {}
    fwd = site_at(rep, "prog_torch_autograd.cpp", lines["LINE_FWD"])
    # The backward line's blocks (one a step; the allocator's own frames may differ between
    # steps, making more than one call stack) are all charged to the forward line.
    bwd = [s for s in site_at(rep, "prog_torch_autograd.cpp", lines["LINE_BWD"]) if s["total_count"] > 0]
    c.true("the backward line has call sites", bwd, [s["frames"] for s in rep.get("sites", [])])
    for fr in [s["frames"] for s in bwd]:  # root first
        names = [f.get("function", "") for f in fr]
        marker = [i for i, n in enumerate(names) if n.startswith("backward of ")]
        c.eq("its marker names the node", [names[i] for i in marker], ["backward of MmBackward0"])
        at = lambda line: [i for i, f in enumerate(fr) if f.get("file", "").endswith("prog_torch_autograd.cpp") and
                           f.get("line") == line]
        c.true("root first: the forward line, then the marker, then the backward line",
               marker and at(lines["LINE_FWD"]) and at(lines["LINE_BWD"]) and
               max(at(lines["LINE_FWD"])) < marker[0] < min(at(lines["LINE_BWD"])),
               [(f.get("function"), f.get("line")) for f in fr])
        c.eq("... of kind temporaries (freed within the pass)",
             [s.get("memory_kind") for s in bwd if s["frames"] is fr], ["temporaries"])
    # Phases: backward (step 1), forward (step 2), backward (step 2); the first backward pass's
    # block (freed within it) is the one looked at when it ended, and nothing outlived its phase.
    pt = [d for d in (rep or {}).get("devices", []) if d.get("allocator") == "pytorch"]
    c.eq("memory_kinds.rules: the phases and their survivors",
         pt[0].get("memory_kinds", {}).get("rules") if pt else None,
         {"phase_changes": 3, "survivor_checks": 1, "survivors": 0, "timeline_points_moved": 0})
    c.eq("the backward line: 8 MiB allocated in 2 blocks",
         (sum(s["total_bytes"] for s in bwd), sum(s["total_count"] for s in bwd)), (8 * MIB, 2))
    grad = site_at(rep, "prog_torch_autograd.cpp", lines["LINE_GRAD"])
    c.eq("the gradient site: a gradient, by the AccumulateGrad rule",
         [(s.get("memory_kind"), s.get("kind_rule")) for s in grad],
         [("gradients", "allocated while autograd ran AccumulateGrad")])
    c.eq("the forward output site: activations (freed by the backward pass)",
         [s.get("memory_kind") for s in fwd
          if not any(f.get("function", "").startswith("backward of ") for f in s["frames"])], ["activations"])
    ws = site_at(rep, "prog_torch_autograd.cpp", lines["LINE_WS"])
    c.eq("the workspace site: a library workspace, by its function's name",
         [(s.get("memory_kind"), s.get("kind_rule")) for s in ws],
         [("library workspaces", "allocated by a library's workspace function")])
    dev = [d for d in rep.get("devices", []) if d.get("allocator") == "pytorch"]
    kinds = (dev[0].get("memory_kinds") or {}).get("at_peak", {}) if dev else {}
    # The peak is step 2's backward: weight 4 + gradient 4 + the output 8 (an activation, as
    # step 1 showed) + the backward block 4 MiB, beside the 2 MiB workspace.
    c.eq("kinds at the peak (MiB)", {k: v // MIB for k, v in kinds.items() if v},
         {"temporaries": 8, "gradients": 4, "activations": 8, "library workspaces": 2})
    c.eq("backward attribution: to a forward line / unseen",
         dev[0].get("backward_attribution") if dev else None, {"to_forward_line": 2, "forward_op_unseen": 1})
    c.eq("stdout: the 1 TiB request failed", pre.val("oom"), 1)
    check_kinds_over_time(c, rep, dev[0] if dev else {}, pre)
    return c.finish([plain, pre])


# The program's blocks one by one, in MiB: (temporaries, gradients, activations, library
# workspaces) after each allocation or free. Step 1 knows nothing yet: its output is a temporary;
# step 2's output is an activation (step 1's backward freed that site's block). Every change moves
# at least 1 MiB (the timeline's step at these totals), so each is a point.
KINDS_OVER_TIME = [
    (4, 0, 0, 0),   # the weight (no parameter frames: a temporary)
    (4, 0, 0, 2),   # the workspace
    (12, 0, 0, 2),  # step 1: the output
    (13, 0, 0, 2),  # the temporary
    (12, 0, 0, 2),  # ... freed
    (16, 0, 0, 2),  # backward's block
    (8, 0, 0, 2),   # the output freed by backward
    (4, 0, 0, 2),   # backward's block freed
    (4, 4, 0, 2),   # AccumulateGrad: the gradient
    (4, 4, 8, 2),   # step 2: the output, an activation
    (5, 4, 8, 2),   # the temporary
    (4, 4, 8, 2),   # ... freed
    (8, 4, 8, 2),   # backward's block: the peak, 22 MiB
    (8, 4, 0, 2),   # the output freed
    (4, 4, 0, 2),   # backward's block freed; the 1 TiB request changes nothing
]


def html_data(run):
    """The data the HTML report of `run` carries (its <script id="data">), or {}."""
    pages = glob.glob(os.path.join(run.out_dir or "", "out-*.html"))
    if len(pages) != 1:
        return {}
    text = open(pages[0], encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    return dict(json.loads(m.group(1)), _page=text) if m else {}


def check_kinds_over_time(c, rep, dev, pre):
    """The kinds' timeline, the device accounting's readings over time and what the device held
    at the OOM, in the JSON, the .txt and the HTML's data, by hand."""
    tl = (dev.get("memory_kinds") or {}).get("timeline", {})
    cols = [tl.get("bytes", {}).get(k, []) for k in ("temporaries", "gradients", "activations", "library workspaces")]
    got = [tuple(col[i] // MIB for col in cols) for i in range(len(tl.get("t_ns", [])))] if all(cols) else []
    c.eq("memory_kinds.timeline: every change a point, (temporaries, gradients, activations, workspaces) MiB",
         got, KINDS_OVER_TIME)
    c.eq("... no other kind", [k for k, v in tl.get("bytes", {}).items() if any(v) and k not in
                               ("temporaries", "gradients", "activations", "library workspaces")], [])
    c.eq("... changes seen", tl.get("changes"), 15)
    t = tl.get("t_ns", [])
    c.true("... times in order", t == sorted(t) and len(set(t)) == len(t), t)
    # The driver's used figure over time (sim: nothing used before the first allocation). Step 1's
    # 4 + 2 + 8 MiB and step 2's output share PyTorch's first 20 MiB segment; step 2's backward
    # block needs a second 20 MiB one (42 MiB with the 2 MiB small segment of the temporaries:
    # 18 MiB allocated, 24 cached). The 1 TiB request makes the allocator give back its free
    # segments (the second 20 MiB and the 2 MiB): 20 MiB, 10 allocated (weight, workspace,
    # gradient) and 10 cached, at the OOM and at exit. The small segment's 2 MiB moved the total by
    # less than a reading's step (4 MiB): no reading of its own.
    acc = dev.get("device_accounting", {})
    atl = acc.get("timeline", {})
    alloc_k, cached_k = "PyTorch's caching allocator: allocated", "PyTorch's caching allocator: cached, free"
    c.eq("device_accounting.timeline: driver used (MiB)", [v // MIB for v in atl.get("driver_used_bytes", [])],
         [20, 42, 20, 20])
    c.eq("... PyTorch allocated / cached (MiB)",
         [[v // MIB for v in atl.get("buckets", {}).get(k, [])] for k in (alloc_k, cached_k)],
         [[0, 18, 10, 10], [20, 24, 10, 10]])
    c.eq("... unexplained", atl.get("unexplained_bytes"), [0, 0, 0, 0])
    c.eq("... the buckets", sorted(atl.get("buckets", {})), sorted([alloc_k, cached_k]))
    ooms = rep.get("ooms", [])
    c.eq("one OOM", len(ooms), 1)
    o = ooms[0] if ooms else {}
    c.eq("the OOM: PyTorch's live blocks by kind (MiB)", {k: v // MIB for k, v in o.get("memory_kinds", {}).items() if v},
         {"temporaries": 4, "gradients": 4, "library workspaces": 2})
    oa = o.get("device_accounting", {})
    c.eq("the OOM: the driver's used figure split (MiB)",
         (oa.get("driver_used_bytes", 0) // MIB, {k: v // MIB for k, v in oa.get("buckets", {}).items()},
          oa.get("unexplained_bytes")), (20, {alloc_k: 10, cached_k: 10}, 0))
    txt = report_text(pre)
    c.true(".txt: the OOM's split", "  device memory at the OOM (" in txt and
           "the driver counts 20.00 MiB (20971520 bytes) used of" in txt and
           "  PyTorch's live blocks by kind at the OOM (10.00 MiB (10485760 bytes)): gradients 4.00 MiB (4194304 "
           "bytes); temporaries 4.00 MiB (4194304 bytes); library workspaces 2.00 MiB (2097152 bytes); other 0 bytes "
           "(0 bytes);\n" in txt, txt[txt.find("== Out-of-memory"):][:1500])
    # The HTML report carries the same series for its stacked views.
    h = html_data(pre)
    page = h.pop("_page", "")
    c.true("html: the stacked views' sections", 'id="sec-kinds"' in page and 'id="sec-accounting"' in page)
    hk = [d.get("kinds") for d in h.get("devices", []) if d.get("kinds")]
    c.eq("html: the kinds' series (points, kinds)",
         (len(hk[0]["t"]), hk[0]["names"]) if hk else None,
         (15, ["parameters", "gradients", "optimizer state", "activations", "temporaries", "private pools",
               "library workspaces", "other"]))
    if hk:
        c.eq("html: ... the gradients' column (MiB)", [v // MIB for v in hk[0]["bytes"][1]],
             [k[1] for k in KINDS_OVER_TIME])
    ha = h.get("accounting", [])
    c.eq("html: the accounting's series (used MiB)", [[v // MIB for v in a["used"]] for a in ha], [[20, 42, 20, 20]])
    ho = h.get("ooms", [])
    c.eq("html: the OOM's split",
         [({n: b // MIB for n, b in x.get("kinds", []) if b}, x.get("accounting", {}).get("used", 0) // MIB) for x in ho],
         [({"temporaries": 4, "gradients": 4, "library workspaces": 2}, 20)])


def case_torch_autograd_join(args, tmp):
    """Two nodes of one type evaluated through the same call (one backward stack), made by two
    forward lines: each backward allocation is charged to its own node's forward line, in both
    steps (the second step's joins come from the per-thread cache; a cache that did not key its
    joins by the forward stack puts all four blocks under one line: checked by breaking it)."""
    c = Checker(args.case)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prog_torch_autograd_join.cpp")
    lines = marker_lines(src)
    plain, pre = both_ran(c, args, tmp)
    c.eq("stdout: the same", pre.values, plain.values)
    rep = pre.report() or {}
    bwd = [s for s in site_at(rep, "prog_torch_autograd_join.cpp", lines["LINE_BWD"]) if s["total_count"] > 0]

    def has_line(site, line):
        return any(f.get("file", "").endswith("prog_torch_autograd_join.cpp") and f.get("line") == line
                   for f in site["frames"])

    for name, line in (("A", lines["LINE_FWD_A"]), ("B", lines["LINE_FWD_B"])):
        mine = [s for s in bwd if has_line(s, line)]
        c.eq("the backward line under forward line %s: 2 MiB in 2 blocks (one a step)" % name,
             (sum(s["total_bytes"] for s in mine), sum(s["total_count"] for s in mine)), (2 * MIB, 2))
    c.eq("no backward site under both forward lines",
         [s["frames"] for s in bwd if has_line(s, lines["LINE_FWD_A"]) and has_line(s, lines["LINE_FWD_B"])], [])
    c.eq("every backward allocation charged to a forward line",
         [d.get("backward_attribution") for d in rep.get("devices", []) if d.get("allocator") == "pytorch"],
         [{"to_forward_line": 4, "forward_op_unseen": 0}])
    return c.finish([plain, pre])
