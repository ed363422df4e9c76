# SPDX-License-Identifier: MIT
"""Preload cases about recorded traces replayed by the CLI: the allocation sequence, a fenced
loop, a device that trails the host."""
import os

from case_common import (MIB, Checker, stat, model_stat, run_prog, cli_replay, check_stats, report_text)
from cases_pool import SEQUENCE_STATS


def case_fenced_replay(args, tmp):
    """A run whose freed blocks waited for fences (a non-blocking stream exists; events
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
    """The device trails the host by a full step (events complete 5 ms after they are
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


def case_stack_sampling(args, tmp):
    """GPUMEMPROF_STACK_SAMPLE=4: prog_trailing_loop makes 484 allocations, by hand: 4 parameters
    and per step 8 x 24 MiB, 8 x 6.5 MiB, 8 x 96 KiB activations and 12 x 48 MiB, 12 x 3000 B
    temporaries (10 steps): 284 of 1 MiB or more, each unwound, and 200 smaller, one in four
    unwound and counted four times in its site. The device's own counts stay exact."""
    c = Checker(args.case)
    r = run_prog(args, tmp, "sampled", True, {"GPUMEMPROF_STACK_SAMPLE": "4",
                                              "GPUMEMPROF_STACK_SAMPLE_FROM": str(1 * MIB)})
    c.eq("exit code", r.rc, 0)
    rep = r.report()
    st = rep["stacks"]
    c.eq("sampling 1 in 4", st.get("sample_one_in"), 4)
    c.eq("every allocation of 1 MiB or more unwound", st.get("sample_always_from"), MIB)
    c.eq("allocations counted by the device: exact", stat(rep, "allocation.all.allocated"), 484)
    out = st.get("sampled_out", -1)
    c.eq("unwound + left without a stack = every allocation", st.get("captures", 0) + out, 484)
    # 200 draws of probability 3/4: 150 expected, standard deviation 6.1.
    c.true("left without a stack: %s of the 200 small ones (about 150)" % out, 110 <= out <= 190)
    # Sites mix sizes (one line allocates all three activations): their counts add up to the
    # large blocks once each and the unwound small ones four times each.
    c.eq("blocks counted in sites: 284 + 4 x the unwound small ones",
         sum(s["total_count"] for s in rep["sites"]), 284 + 4 * (200 - out))
    c.true("the .txt says stacks are sampled", "stacks sampled: 1 in 4" in report_text(r))
    full = run_prog(args, tmp, "full", True, {})
    fst = full.report()["stacks"]
    c.eq("by default: no sampling", (fst.get("sample_one_in"), fst.get("sampled_out")), (1, 0))
    # A loop's repeated stacks: their native walks stop where they meet one the thread remembers.
    c.true("shadow hits counted", 0 < fst.get("shadow_hits", 0) <= fst.get("captures", 0))
    c.true("frames not walked counted", fst.get("shadow_hits", 0) <= fst.get("shadow_frames", 0) <=
           fst.get("frames_captured", 0))
    c.true("the .txt says so", "met a walk the thread remembers" in report_text(full))
    return c.finish([r, full])
