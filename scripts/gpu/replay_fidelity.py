#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Replay fidelity check (issues 4, 9): does `gpumemprof replay` reproduce PyTorch's own peaks?

For each workload of fidelity_workloads.py and each allocator setting ("" = PyTorch's defaults,
max_split_size_mb:64, roundup_power2_divisions:4, expandable_segments:True), a FRESH worker process (PYTORCH_CUDA_ALLOC_CONF is
read once, at startup) records the caching allocator's history from before its first allocation,
runs the workload, reads torch.cuda.memory_stats() and dumps the snapshot. This process then converts
the snapshot (scripts/torch_snapshot_to_trace.py), replays it with the same settings
(`gpumemprof replay TRACE --conf SETTINGS --json`) and compares the replayed reserved_bytes.all.peak
and allocated_bytes.all.peak with PyTorch's. A difference over 0.5% is a FAIL.

A run whose premises do not hold is INVALID rather than compared blindly: the history ring buffer
overflowed, the trace's alloc/segment counts disagree with PyTorch's counters, PyTorch did not apply
the requested settings, expandable segments were on without being asked for, CUDA-graph pools / an
OOM were involved (things the replay cannot reproduce). Legitimate differences that the replay does model (several streams,
record_stream-deferred frees) are listed as notes.

usage (GPU machine, torch installed):
  python3 scripts/gpu/replay_fidelity.py --gpumemprof PATH/TO/gpumemprof --out fidelity.json
      [--workloads training,inference_varlen,growing_cache] [--confs ";max_split_size_mb:64"]
      [--scale 1.0] [--workdir DIR] [--max-entries 10000000] [--force-no-expandable]
without torch or GPU (tests the convert + replay + compare path on synthetic snapshots):
  python3 scripts/gpu/replay_fidelity.py --selftest --gpumemprof build/src/tools/gpumemprof --out st.json

exit status: 0 all PASS (selftest: every expectation met), 1 otherwise, 2 bad arguments.
"""

import argparse
import collections
import importlib.util
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
CONVERTER = os.path.join(SCRIPTS, "torch_snapshot_to_trace.py")
MAKE_SNAPSHOT = os.path.join(SCRIPTS, "make_test_snapshot.py")

CONFS = ["", "max_split_size_mb:64", "roundup_power2_divisions:4", "expandable_segments:True"]
TOLERANCE = 0.005          # relative difference above which a peak comparison FAILs
DEVICE = 0                 # the worker uses cuda:0 (of CUDA_VISIBLE_DEVICES)
DEFAULT_MAX_ENTRIES = 10_000_000
MiB = 1 << 20

# torch.cuda.memory_stats() keys the worker keeps (before the workload and after it).
STAT_KEYS = [
    "reserved_bytes.all.peak", "reserved_bytes.all.current", "allocated_bytes.all.peak",
    "allocated_bytes.all.current", "requested_bytes.all.peak", "active_bytes.all.peak",
    "inactive_split_bytes.all.peak", "segment.all.peak", "segment.all.current", "segment.all.allocated",
    "allocation.all.allocated", "allocation.all.freed", "allocation.all.peak", "num_device_alloc",
    "num_device_free", "num_alloc_retries", "num_ooms", "num_sync_all_streams", "max_split_size",
]
# Env variables that would change the recorded process's allocator behind our back.
ALLOC_ENV = ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
             "PYTORCH_NO_CUDA_MEMORY_CACHING"]


# ---- worker side (runs in a fresh process per run) ----------------------------------------------

def _pick(stats):
    return {k: stats[k] for k in STAT_KEYS if k in stats}


def _write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _start_history(torch, max_entries):
    """Record alloc/free history without stack traces (cheap: the replay needs none)."""
    rec = torch.cuda.memory._record_memory_history
    try:
        rec(enabled="all", context=None, stacks="python", max_entries=max_entries)
        return "enabled=all, context=None, stacks=python, max_entries=%d" % max_entries
    except (TypeError, ValueError, RuntimeError):  # another signature: the defaults record it too
        rec(max_entries=max_entries)
        return "defaults, max_entries=%d" % max_entries


def worker_torch(args, result):
    import torch  # PYTORCH_CUDA_ALLOC_CONF was set by the parent before this process started

    sys.path.insert(0, HERE)
    import fidelity_workloads as fw

    device = torch.device("cuda", DEVICE)
    torch.cuda.init()  # CUDA context and allocator objects; no caching-allocator allocation yet
    result["environment"] = {
        "torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
        "device_name": torch.cuda.get_device_name(device),
        "allocator_backend": getattr(torch.cuda, "get_allocator_backend", lambda: "?")(),
    }
    result["pre_stats"] = _pick(torch.cuda.memory_stats(device))
    # Before any allocation, so the trace starts at the first one (no blocks predate it).
    result["history"] = _start_history(torch, args.max_entries)
    t0 = time.perf_counter()
    result["workload_info"] = fw.WORKLOADS[args.workload](device, args.steps)
    torch.cuda.synchronize(device)
    result["workload_s"] = round(time.perf_counter() - t0, 3)
    result["torch_stats"] = _pick(torch.cuda.memory_stats(device))
    snap = os.path.join(args.outdir, "snapshot.pickle")
    torch.cuda.memory._dump_snapshot(snap)
    torch.cuda.memory._record_memory_history(enabled=None)
    result["snapshot"] = snap
    result["capacity_bytes"] = int(torch.cuda.mem_get_info(device)[1])


def _settings_torch_would_record(conf):
    """allocator_settings as PyTorch writes them into a snapshot for `conf` (selftest)."""
    settings = {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1, "expandable_segments": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
    for key, value in _parse_conf(conf).items():
        if key == "max_split_size_mb":
            settings["max_split_size"] = int(value) * MiB
        elif key == "roundup_power2_divisions" and value.isdigit():
            settings["roundup_power2_divisions"] = {str(1 << i): int(value) for i in range(16)}
        elif key == "expandable_segments":
            settings["expandable_segments"] = value == "True"
    return settings


def worker_selftest(args, result):
    """Stands in for worker_torch without torch: a synthetic snapshot from make_test_snapshot.py."""
    snap = os.path.join(args.outdir, "snapshot.pickle")
    cmd = [sys.executable, MAKE_SNAPSHOT, snap, "--scenario", args.selftest_scenario, "--conf", args.env_conf]
    if args.selftest_scenario == "random":
        cmd += ["--events", "4000", "--seed", "5"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    with open(snap, "rb") as f:  # our own plain-dict pickle
        s = pickle.load(f)
    s["allocator_settings"].update(_settings_torch_would_record(args.env_conf))
    if args.selftest_scenario == "basic":
        # Its OOM entry would (rightly) make the run INVALID; the unit checks cover that case.
        s["device_traces"] = [[e for e in t if e.get("action") != "oom"] for t in s["device_traces"]]
    with open(snap, "wb") as f:
        pickle.dump(s, f, protocol=4)
    result["environment"] = {"torch": "none (selftest: make_test_snapshot.py --scenario %s)"
                             % args.selftest_scenario, "python": sys.version.split()[0]}
    result["history"] = "synthetic"
    result["workload_s"] = 0.0
    result["snapshot"] = snap
    result["capacity_bytes"] = 0
    if args.selftest_scenario == "basic":
        # Device 0 of the "basic" scenario (see make_test_snapshot.py), figures by hand:
        #   segments S1 20 MiB, S2 2 MiB (both before recording), S3 14 MiB (recorded):
        #     reserved peak = 20 + 2 + 14 MiB = 36 MiB = 37748736, 3 cudaMallocs, 3 segments at peak
        #   live together at the peak: A 3 MiB, B 1000 B -> 1024 (512-byte rounding), D 5 MiB,
        #     C 14 MiB: allocated peak = 22 MiB + 1024 = 23069696
        #   before recording: A and B allocated, 22 MiB reserved (so it is NOT recorded from the first
        #   allocation and the count cross-checks are skipped). Its OOM entry was removed above.
        # None of these sizes changes under max_split_size_mb:64 (all < 64 MiB) or
        # roundup_power2_divisions:4 (3, 5 and 14 MiB are already on a quarter-interval boundary).
        result["pre_stats"] = {"allocation.all.allocated": 2, "reserved_bytes.all.current": 22 * MiB,
                               "num_device_alloc": 2}
        result["torch_stats"] = {"reserved_bytes.all.peak": 37748736, "allocated_bytes.all.peak": 23069696,
                                 "num_device_alloc": 3, "segment.all.peak": 3, "num_alloc_retries": 0,
                                 "num_ooms": 0}
    elif args.selftest_scenario == "expandable":
        # make_test_snapshot.py --scenario expandable, by hand: maps of 20, 20 and 2 MiB = 42 MiB
        # reserved (44040192); a 5 MiB and b 30 MiB live together = 35 MiB allocated (36700160);
        # recorded from the first allocation: 4 allocs, 2 frees, 3 maps.
        result["pre_stats"] = {"allocation.all.allocated": 0, "reserved_bytes.all.current": 0}
        result["torch_stats"] = {"reserved_bytes.all.peak": 44040192, "allocated_bytes.all.peak": 36700160,
                                 "allocation.all.allocated": 4, "allocation.all.freed": 2, "num_device_alloc": 3,
                                 "num_device_free": 0, "segment.all.peak": 0, "num_alloc_retries": 0,
                                 "num_ooms": 0}
    else:
        # "random": addresses are unique and every pre-existing block sits in its own segment, which
        # PyTorch's policy would never produce; its "PyTorch" reserved peak is what the snapshot
        # itself says (final segments, no segment events), so the replay must disagree -> FAIL.
        reserved = sum(seg.get("total_size", 0) for seg in s["segments"] if seg.get("device") == DEVICE)
        result["pre_stats"] = {"allocation.all.allocated": len(s["segments"]), "reserved_bytes.all.current": reserved}
        result["torch_stats"] = {"reserved_bytes.all.peak": reserved, "allocated_bytes.all.peak": reserved,
                                 "num_device_alloc": len(s["segments"]), "num_ooms": 0, "num_alloc_retries": 0}


def worker_main(args):
    os.makedirs(args.outdir, exist_ok=True)
    out = os.path.join(args.outdir, "worker.json")
    result = {"workload": args.workload, "conf": args.conf, "env_conf": args.env_conf, "steps": args.steps,
              "max_entries": args.max_entries, "pid": os.getpid()}
    t0 = time.perf_counter()
    try:
        seen = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        if seen != args.env_conf:
            raise RuntimeError("PYTORCH_CUDA_ALLOC_CONF is %r, expected %r" % (seen, args.env_conf))
        if args.selftest_scenario:
            worker_selftest(args, result)
        else:
            worker_torch(args, result)
        rc = 0
    except Exception:  # noqa: BLE001 - reported to the parent in the JSON
        result["error"] = traceback.format_exc()[-4000:]
        rc = 1
    result["worker_s"] = round(time.perf_counter() - t0, 3)
    _write_json(out, result)
    return rc


# ---- parent side: convert, replay, compare ------------------------------------------------------

def _load_converter():
    spec = importlib.util.spec_from_file_location("torch_snapshot_to_trace", CONVERTER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _parse_conf(conf):
    """'a:1,b:[x:y,z:w]' -> {'a': '1', 'b': '[x:y,z:w]'} (brackets keep their commas)."""
    out, depth, cur = {}, 0, ""
    for ch in conf + ",":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                k, _, v = cur.partition(":")
                out[k.strip()] = v.strip()
            cur = ""
        else:
            cur += ch
    return out


def rel_diff(ours, theirs):
    if theirs is None or ours is None:
        return None
    if theirs == 0:
        return 0.0 if ours == 0 else math.inf
    return (ours - theirs) / theirs


def check_settings(conf, settings):
    """Did PyTorch apply `conf`? Compares the snapshot's allocator_settings with what conf asks."""
    if not isinstance(settings, dict) or not settings:
        return None, "snapshot has no allocator_settings: settings not verified"
    problems = []
    want = _parse_conf(conf)
    msplit = settings.get("max_split_size")
    if isinstance(msplit, int):
        if "max_split_size_mb" in want:
            exp = int(want["max_split_size_mb"]) * MiB
            if msplit != exp:
                problems.append("max_split_size is %d, expected %d" % (msplit, exp))
        elif not (msplit == -1 or msplit >= 1 << 62):
            problems.append("max_split_size is %d, expected unlimited" % msplit)
    divs = settings.get("roundup_power2_divisions")
    if isinstance(divs, dict) and divs:
        values = set(divs.values())
        w = want.get("roundup_power2_divisions")
        if w is None:
            if values - {0, 1}:
                problems.append("roundup_power2_divisions %s, expected none" % sorted(values))
        elif w.isdigit() and values != {int(w)}:
            problems.append("roundup_power2_divisions %s, expected all %s" % (sorted(values), w))
    if settings.get("expandable_segments") and want.get("expandable_segments") != "True":
        problems.append("expandable_segments is on")
    if settings.get("expandable_segments") is False and want.get("expandable_segments") == "True":
        problems.append("expandable_segments is off")
    return (not problems), "; ".join(problems) if problems else "applied"


def snapshot_diagnostics(snap, device, max_entries, conf, torch_stats, pre_stats):
    """Facts about the recording that decide whether the comparison is meaningful.
    Returns (facts dict, notes list of (severity, text)); severity 'invalid' or 'info'."""
    notes = []
    traces = snap.get("device_traces") or []
    entries = traces[device] if device < len(traces) and isinstance(traces[device], list) else []
    entries = [e for e in entries if isinstance(e, dict)]
    counts = collections.Counter(e.get("action") for e in entries)
    facts = {"trace_entries": len(entries), "actions": dict(counts)}

    if len(entries) >= max_entries:
        notes.append(("invalid", "history ring buffer full (%d entries = max_entries): the oldest events are "
                                 "lost" % len(entries)))
    others = [i for i, t in enumerate(traces) if i != device and isinstance(t, list) and t]
    if others:
        notes.append(("info", "trace also has events on device(s) %s; only device %d is compared"
                              % (others, device)))

    streams = sorted({e.get("stream") for e in entries if e.get("action") in ("alloc", "segment_alloc")},
                     key=lambda s: (s is None, s))
    facts["streams"] = len(streams)
    if len(streams) > 1:
        notes.append(("info", "%d streams allocate; the replay keeps PyTorch's per-stream pools (a free block "
                              "is reused only on its own stream)" % len(streams)))

    # A free completed later than right after its request: record_stream (events) deferred it.
    pending, deferred = {}, 0
    for i, e in enumerate(entries):
        a = e.get("action")
        if a == "free_requested":
            pending[e.get("addr")] = i
        elif a == "free_completed":
            j = pending.pop(e.get("addr"), None)
            if j is not None and j != i - 1:
                deferred += 1
    facts["deferred_frees"] = deferred
    facts["frees_pending_at_end"] = len(pending)
    if deferred or pending:
        notes.append(("info", "%d frees completed after other events and %d never completed (record_stream); "
                              "the replay frees at free_completed, as PyTorch did" % (deferred, len(pending))))

    # PyTorch breaks best-fit ties between equal free blocks by address. The replay's simulated
    # device hands out segment addresses in increasing order, so ties resolve alike only when the
    # real cudaMalloc addresses also increased in allocation order (no segment was freed here).
    # Only order within one pool of one stream matters (small-pool segments are exactly 2 MiB;
    # large-pool ones are 20 MiB or >= 10 MiB).
    seg_addrs = [e for e in entries if e.get("action") == "segment_alloc"]
    inversions, top = 0, {}
    for e in seg_addrs:
        key, a = (e.get("stream"), e.get("size") == 2 * MiB), e.get("addr") or 0
        if a < top.get(key, -1):
            inversions += 1
        top[key] = max(top.get(key, -1), a)
    facts["segment_address_inversions"] = inversions
    if inversions:
        notes.append(("info", "%d of %d segments got a lower address than an earlier one: where equal-sized free "
                              "blocks tie, PyTorch picks the lowest real address and the replay its simulated "
                              "order, which can differ" % (inversions, len(seg_addrs))))

    settings = snap.get("allocator_settings") or {}
    segments = [s for s in (snap.get("segments") or []) if isinstance(s, dict) and s.get("device", 0) == device]
    expandable = bool(counts.get("segment_map") or counts.get("segment_unmap")
                      or any(s.get("is_expandable") for s in segments)
                      or (isinstance(settings, dict) and settings.get("expandable_segments")))
    facts["expandable"] = expandable
    if expandable and _parse_conf(conf).get("expandable_segments") != "True":
        notes.append(("invalid", "expandable segments in use but not in the replayed settings "
                                 "(pass expandable_segments:True, or rerun with --force-no-expandable)"))
    elif expandable:
        notes.append(("info", "expandable segments: %d maps, %d unmaps; the replay maps 2 MiB / 20 MiB pages "
                              "as PyTorch does" % (counts.get("segment_map", 0), counts.get("segment_unmap", 0))))
    pools = {tuple(s.get("segment_pool_id") or (0, 0)) for s in segments} - {(0, 0)}
    if pools:
        notes.append(("invalid", "segments of private pools %s (CUDA graphs / MemPool): the replay has one "
                                 "pool per device" % sorted(pools)))
    if counts.get("oom") or (torch_stats.get("num_ooms") or 0):
        notes.append(("invalid", "the recorded run hit %d OOM(s): PyTorch then freed cached segments and "
                                 "retried; the failed request is not in the trace as an allocation"
                      % max(counts.get("oom", 0), torch_stats.get("num_ooms") or 0)))
    if torch_stats.get("num_alloc_retries"):
        notes.append(("invalid", "%d alloc retries (cudaMalloc failed, cache flushed) in the recorded run"
                      % torch_stats["num_alloc_retries"]))

    ok, text = check_settings(conf, settings)
    facts["settings_check"] = text
    facts["recorded_conf"] = settings.get("PYTORCH_CUDA_ALLOC_CONF") if isinstance(settings, dict) else None
    if ok is False:
        notes.append(("invalid", "PyTorch did not run with the requested settings: " + text))
    elif ok is None:
        notes.append(("info", text))

    from_first = (pre_stats.get("allocation.all.allocated", 0) == 0
                  and pre_stats.get("reserved_bytes.all.current", 0) == 0)
    facts["recorded_from_first_alloc"] = from_first
    if from_first:
        # Every allocation, free request (allocation.freed counts requests) and cudaMalloc/cudaFree of
        # the process must be in the trace.
        # (With expandable segments num_device_alloc/free count maps/unmaps.)
        pairs = [(("alloc",), "allocation.all.allocated"), (("free_requested",), "allocation.all.freed"),
                 (("segment_alloc", "segment_map"), "num_device_alloc"),
                 (("segment_free", "segment_unmap"), "num_device_free")]
        for actions, key in pairs:
            n = sum(counts.get(a, 0) for a in actions)
            if key in torch_stats and n != torch_stats[key]:
                notes.append(("invalid", "trace has %d '%s' entries but PyTorch counted %s = %d: the trace is "
                                         "incomplete" % (n, "+".join(actions), key, torch_stats[key])))
        first = next((e.get("action") for e in entries
                      if e.get("action") in ("alloc", "segment_alloc", "segment_map")), None)
        if first is not None and first not in ("segment_alloc", "segment_map"):
            notes.append(("invalid", "the first recorded allocation found a cached block: recording did not "
                                     "start at the first allocation"))
    else:
        notes.append(("info", "recording began after %d allocations with %d bytes reserved: blocks live then "
                              "are replayed first (address order); cached free blocks of that time are not "
                              "known, so the start state may differ"
                      % (pre_stats.get("allocation.all.allocated", 0),
                         pre_stats.get("reserved_bytes.all.current", 0))))
    return facts, notes


def judge(torch_reserved, replay_reserved, torch_allocated, replay_allocated, invalid, error):
    dr = rel_diff(replay_reserved, torch_reserved)
    da = rel_diff(replay_allocated, torch_allocated)
    if error:
        return "ERROR", dr, da
    if invalid:
        return "INVALID", dr, da
    if dr is None or da is None or abs(dr) > TOLERANCE or abs(da) > TOLERANCE:
        return "FAIL", dr, da
    return "PASS", dr, da


def _slug(conf):
    return re.sub(r"[^A-Za-z0-9]+", "_", conf).strip("_") or "default"


def _tail(text, n=1500):
    return (text or "")[-n:]


def run_case(args, workload, conf, steps, workdir, index, total, scenario=None):
    env_conf = conf
    if args.force_no_expandable and "expandable_segments" not in conf:
        env_conf = (conf + "," if conf else "") + "expandable_segments:False"
    case_dir = os.path.join(workdir, "%s__%s" % (workload, _slug(conf)))
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    r = {"workload": workload, "conf": conf, "env_conf": env_conf, "replay_conf": env_conf, "dir": case_dir,
         "notes": [], "error": None}
    label = "[%d/%d] %s / %s" % (index, total, workload, conf or "(defaults)")

    env = dict(os.environ)
    for k in ALLOC_ENV:
        env.pop(k, None)
    if env_conf:
        # Newer torch reads PYTORCH_ALLOC_CONF first; the same text in both is unambiguous.
        env["PYTORCH_CUDA_ALLOC_CONF"] = env["PYTORCH_ALLOC_CONF"] = env_conf
    if "gpumemprof" in env.get("LD_PRELOAD", ""):
        env.pop("LD_PRELOAD")  # PyTorch's own allocator is what is measured here
    env["PYTHONHASHSEED"] = "0"
    cmd = [args.python, os.path.abspath(__file__), "--worker", "--workload", workload, "--conf", conf,
           "--env-conf", env_conf, "--outdir", case_dir, "--steps", str(steps), "--max-entries",
           str(args.max_entries)]
    if scenario:
        cmd += ["--selftest-scenario", scenario]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        r["worker_rc"] = p.returncode
        worker_stderr = p.stderr
    except subprocess.TimeoutExpired as e:
        r["worker_rc"] = None
        worker_stderr = "timeout after %s s\n%s" % (args.timeout, e.stderr or "")
    r["worker_wall_s"] = round(time.perf_counter() - t0, 2)
    wj = os.path.join(case_dir, "worker.json")
    w = {}
    if os.path.exists(wj):
        with open(wj) as f:
            w = json.load(f)
    r["worker"] = {k: w.get(k) for k in ("environment", "history", "workload_info", "workload_s", "steps",
                                         "capacity_bytes", "pre_stats")}
    ts = w.get("torch_stats") or {}
    r["torch"] = ts
    if r["worker_rc"] != 0 or w.get("error") or not w.get("snapshot"):
        r["error"] = "worker failed (rc %s): %s" % (r["worker_rc"], _tail(w.get("error") or worker_stderr))
        return _finish(r, label)

    snap_path = w["snapshot"]
    r["snapshot_bytes"] = os.path.getsize(snap_path)
    trace_path = os.path.join(case_dir, "trace.gmt")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, CONVERTER, snap_path, trace_path], capture_output=True, text=True)
    r["convert_s"] = round(time.perf_counter() - t0, 2)
    r["convert_output"] = p.stdout.strip()
    if p.returncode != 0:
        r["error"] = "converter failed (rc %d): %s" % (p.returncode, _tail(p.stderr))
        return _finish(r, label)
    m = re.search(r"(\d+) events on (\d+) device\(s\), (\d+) blocks live before recording, (\d+) entries skipped",
                  p.stdout)
    if m:
        r["converted"] = {"events": int(m.group(1)), "devices": int(m.group(2)), "live_blocks": int(m.group(3)),
                          "skipped_entries": int(m.group(4))}

    rcmd = [args.gpumemprof, "replay", trace_path, "--conf", env_conf, "--json"]
    if w.get("capacity_bytes"):
        rcmd += ["--capacity", str(w["capacity_bytes"])]
    r["replay_command"] = rcmd
    t0 = time.perf_counter()
    p = subprocess.run(rcmd, capture_output=True, text=True)
    r["replay_s"] = round(time.perf_counter() - t0, 3)
    if p.returncode != 0:
        r["error"] = "gpumemprof replay failed (rc %d): %s" % (p.returncode, _tail(p.stderr))
        return _finish(r, label)
    if p.stderr.strip():
        r["notes"].append(("info", "replay said: " + _tail(p.stderr.strip(), 400)))
    try:
        rep = json.loads(p.stdout)
        dev = next(d for d in rep["devices"] if d["device"] == DEVICE)
    except (ValueError, KeyError, StopIteration) as e:
        r["error"] = "unexpected replay output (%s): %s" % (e, _tail(p.stdout, 400))
        return _finish(r, label)
    ms = dev["memory_stats"]
    r["replay"] = {k: ms.get(k) for k in STAT_KEYS if k in ms}
    r["replay"].update({"events": rep.get("events"), "live_blocks": rep.get("live_blocks"),
                        "unmatched_frees": rep.get("unmatched_frees"), "capacity": dev.get("capacity"),
                        "failed_allocs": dev.get("replay", {}).get("failed_allocs"),
                        "skipped_frees": dev.get("replay", {}).get("skipped_frees"),
                        "recorded_reserved_peak": dev.get("recorded", {}).get("reserved_bytes_peak")})

    conv = _load_converter()
    snap = conv.load_snapshot(snap_path)
    facts, notes = snapshot_diagnostics(snap, DEVICE, args.max_entries, env_conf, ts, w.get("pre_stats") or {})
    r["facts"] = facts
    r["notes"].extend(notes)
    backend = ((w.get("environment") or {}).get("allocator_backend"))
    if backend not in (None, "?", "native"):
        r["notes"].append(("invalid", "PyTorch used the %r allocator backend, not its caching allocator" % backend))
    rp = r["replay"]
    if rp.get("failed_allocs"):
        r["notes"].append(("invalid", "%d requests ran out of memory in the replay (capacity %s)"
                           % (rp["failed_allocs"], rp.get("capacity"))))
    if rep.get("unmatched_frees"):
        r["notes"].append(("info", "%d frees of addresses the trace never allocated" % rep["unmatched_frees"]))
    if facts.get("recorded_from_first_alloc"):
        for key in ("num_device_alloc", "num_device_free", "segment.all.peak", "num_alloc_retries"):
            if key in ts and key in rp and ts[key] != rp[key]:
                r["notes"].append(("info", "%s differs: PyTorch %s, replay %s" % (key, ts[key], rp[key])))
    if rp.get("recorded_reserved_peak") is not None and ts.get("reserved_bytes.all.peak") is not None \
            and rp["recorded_reserved_peak"] != ts["reserved_bytes.all.peak"]:
        # From the first allocation on, the trace's segment events must add up to PyTorch's counter.
        r["notes"].append(("invalid" if facts.get("recorded_from_first_alloc") else "info",
                           "the trace's own segment events give a reserved peak of %d, PyTorch's counter %d"
                           % (rp["recorded_reserved_peak"], ts["reserved_bytes.all.peak"])))
    return _finish(r, label)


def _finish(r, label):
    ts, rp = r.get("torch") or {}, r.get("replay") or {}
    invalid = any(sev == "invalid" for sev, _ in r["notes"])
    status, dr, da = judge(ts.get("reserved_bytes.all.peak"), rp.get("reserved_bytes.all.peak"),
                           ts.get("allocated_bytes.all.peak"), rp.get("allocated_bytes.all.peak"), invalid,
                           r.get("error"))
    r["status"], r["reserved_rel_diff"], r["allocated_rel_diff"] = status, dr, da
    r["notes"] = [{"severity": s, "text": t} for s, t in r["notes"]]
    facts = r.get("facts") or {}
    print("%s: %s  (worker %.1f s, %s trace entries, convert %s s, replay %s s)"
          % (label, status, r.get("worker_wall_s", 0), facts.get("trace_entries", "?"), r.get("convert_s", "?"),
             r.get("replay_s", "?")), flush=True)
    if r.get("error"):
        print("    error: " + r["error"].replace("\n", "\n    "), flush=True)
    for n in r["notes"]:
        print("    %s: %s" % (n["severity"], n["text"]), flush=True)
    return r


# ---- output -------------------------------------------------------------------------------------

def human(n):
    if n is None:
        return "-"
    v, u = float(n), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while abs(v) >= 1024 and u < 4:
        v /= 1024
        u += 1
    return "%d B" % n if u == 0 else "%.2f %s" % (v, units[u])


def pct(d):
    if d is None:
        return "-"
    if math.isinf(d):
        return "inf"
    return "%+.3f%%" % (100 * d)


def print_table(runs):
    head = ["workload", "conf", "torch reserved", "replay reserved", "diff", "torch alloc", "replay alloc",
            "diff", "dev allocs t/r", "result"]
    rows = []
    for r in runs:
        ts, rp = r.get("torch") or {}, r.get("replay") or {}
        rows.append([r["workload"], r["conf"] or "(defaults)", human(ts.get("reserved_bytes.all.peak")),
                     human(rp.get("reserved_bytes.all.peak")), pct(r["reserved_rel_diff"]),
                     human(ts.get("allocated_bytes.all.peak")), human(rp.get("allocated_bytes.all.peak")),
                     pct(r["allocated_rel_diff"]),
                     "%s / %s" % (ts.get("num_device_alloc", "-"), rp.get("num_device_alloc", "-")), r["status"]])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    print()
    print(fmt % tuple(head))
    print(fmt % tuple("-" * w for w in widths))
    for row in rows:
        print(fmt % tuple(row))


def markdown_table(runs):
    def b(n):
        return "-" if n is None else "%d" % n
    lines = ["| workload | PYTORCH_CUDA_ALLOC_CONF | PyTorch reserved peak (B) | replayed reserved peak (B) | diff "
             "| PyTorch allocated peak (B) | replayed allocated peak (B) | diff | cudaMalloc calls PyTorch / replay "
             "| result |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        ts, rp = r.get("torch") or {}, r.get("replay") or {}
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |" % (
            r["workload"], "`%s`" % r["conf"] if r["conf"] else "(defaults)",
            b(ts.get("reserved_bytes.all.peak")), b(rp.get("reserved_bytes.all.peak")), pct(r["reserved_rel_diff"]),
            b(ts.get("allocated_bytes.all.peak")), b(rp.get("allocated_bytes.all.peak")),
            pct(r["allocated_rel_diff"]), ts.get("num_device_alloc", "-"), rp.get("num_device_alloc", "-"),
            r["status"]))
    return "\n".join(lines)


# ---- selftest -----------------------------------------------------------------------------------

def selftest_unit_checks(workdir):
    """In-process checks of the judging logic; each returns (name, ok, detail)."""
    out = []
    # 0.4% is within the 0.5% tolerance, 0.6% is not (100000 * 1.004 = 100400, * 1.006 = 100600).
    out.append(("0.4% difference passes", judge(100000, 100400, 100, 100, False, None)[0] == "PASS", ""))
    out.append(("0.6% difference fails", judge(100000, 100600, 100, 100, False, None)[0] == "FAIL", ""))
    out.append(("allocated-peak difference fails", judge(100, 100, 1000, 994, False, None)[0] == "FAIL", ""))
    out.append(("invalid premises win over equal numbers", judge(1, 1, 1, 1, True, None)[0] == "INVALID", ""))
    # Diagnostics on the synthetic "basic" snapshot (9 device-0 entries, 2 allocs, 1 segment_alloc).
    snap_path = os.path.join(workdir, "unit.pickle")
    subprocess.run([sys.executable, MAKE_SNAPSHOT, snap_path], check=True, capture_output=True)
    snap = _load_converter().load_snapshot(snap_path)
    _, notes = snapshot_diagnostics(snap, 0, 9, "", {}, {})
    out.append(("ring buffer overflow flagged", any("ring buffer" in t for s, t in notes if s == "invalid"), ""))
    _, notes = snapshot_diagnostics(snap, 0, 100, "", {"allocation.all.allocated": 5, "num_device_alloc": 1},
                                    {"allocation.all.allocated": 0, "reserved_bytes.all.current": 0})
    out.append(("trace/counter mismatch flagged", any("'alloc' entries" in t for s, t in notes if s == "invalid")
                and not any("'segment_alloc' entries" in t for s, t in notes), ""))
    out.append(("first allocation without a segment flagged",
                any("did not start at the first" in t for s, t in notes), ""))
    out.append(("OOM in the recording flagged", any("OOM" in t for s, t in notes if s == "invalid"), ""))
    # Two 20 MiB large-pool segments on stream 0, the second at a lower address: one inversion; a
    # 2 MiB small-pool segment below both is another pool and does not count.
    fake = {"device_traces": [[{"action": "segment_alloc", "addr": a, "size": n, "stream": 0}
                               for a, n in ((0x9000000, 20 * MiB), (0x2000000, 20 * MiB), (0x1000000, 2 * MiB))]]}
    facts, _ = snapshot_diagnostics(fake, 0, 100, "", {}, {})
    out.append(("segment address inversions counted per pool", facts["segment_address_inversions"] == 1,
                str(facts["segment_address_inversions"])))
    # Expandable segments: compared when the replay is given the setting, invalid when it is not; maps
    # count as device allocations.
    fake = {"device_traces": [[{"action": "segment_map", "addr": 0x1000000, "size": 20 * MiB, "stream": 0},
                               {"action": "alloc", "addr": 0x1000000, "size": 5 * MiB, "stream": 0}]],
            "allocator_settings": _settings_torch_would_record("expandable_segments:True")}
    st = {"allocation.all.allocated": 1, "num_device_alloc": 1}
    pre = {"allocation.all.allocated": 0, "reserved_bytes.all.current": 0}
    _, notes = snapshot_diagnostics(fake, 0, 100, "expandable_segments:True", st, pre)
    out.append(("expandable recording with the setting is compared", not [t for s, t in notes if s == "invalid"],
                str(notes)))
    _, notes = snapshot_diagnostics(fake, 0, 100, "", st, pre)
    out.append(("expandable recording without the setting flagged",
                any("expandable" in t for s, t in notes if s == "invalid"), str(notes)))
    ok, text = check_settings("max_split_size_mb:64", snap.get("allocator_settings"))
    out.append(("settings not applied flagged", ok is False and "max_split_size" in text, text))
    ok, text = check_settings("roundup_power2_divisions:4",
                              _settings_torch_would_record("roundup_power2_divisions:4"))
    out.append(("applied settings accepted", ok is True, text))
    return out


def selftest(args, workdir):
    # (scenario, conf, expected status): "basic" is PyTorch-consistent with hand-computed figures;
    # "random" is not (see worker_selftest), so the comparison must catch it.
    # "expandable" with the setting must match exactly; recorded without it (PyTorch's settings say
    # off, the trace maps pages), the run is INVALID rather than compared.
    cases = [("basic", "", "PASS"), ("basic", "max_split_size_mb:64", "PASS"),
             ("basic", "roundup_power2_divisions:4", "PASS"), ("random", "", "FAIL"),
             ("expandable", "expandable_segments:True", "PASS"), ("expandable", "", "INVALID")]
    runs = []
    for i, (scenario, conf, _) in enumerate(cases, 1):
        runs.append(run_case(args, "selftest_" + scenario, conf, 0, workdir, i, len(cases), scenario=scenario))
    results = []
    for (scenario, conf, expected), r in zip(cases, runs):
        ok = r["status"] == expected
        if expected == "PASS":  # not merely within 0.5%: the hand-computed figures exactly
            ok = ok and r["reserved_rel_diff"] == 0 and r["allocated_rel_diff"] == 0
        results.append(("run %s / %s is %s%s" % (scenario, conf or "(defaults)", expected,
                                                  " with exact peaks" if expected == "PASS" else ""),
                        bool(ok), r["status"]))
    results += selftest_unit_checks(workdir)
    return runs, results


# ---- main ---------------------------------------------------------------------------------------

def find_gpumemprof(given):
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    return shutil.which("gpumemprof")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--gpumemprof", help="the gpumemprof CLI binary (default: on PATH)")
    ap.add_argument("--out", default="replay-fidelity.json", help="JSON file for all results")
    ap.add_argument("--workloads", default="training,inference_varlen,growing_cache",
                    help="comma-separated subset of fidelity_workloads.WORKLOADS")
    ap.add_argument("--confs", default=None,
                    help="';'-separated allocator settings to check (default: '', max_split_size_mb:64, "
                         "roundup_power2_divisions:4)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every workload's step count")
    ap.add_argument("--workdir", help="where snapshots and traces go (default: a new temporary directory)")
    ap.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES, help="history ring buffer size")
    ap.add_argument("--timeout", type=int, default=300, help="seconds allowed per worker process")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the workers (needs torch)")
    ap.add_argument("--force-no-expandable", action="store_true",
                    help="append expandable_segments:False to the settings (should PyTorch default to them)")
    ap.add_argument("--selftest", action="store_true",
                    help="no torch: synthetic snapshots through the same convert/replay/compare path")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--conf", default="", help=argparse.SUPPRESS)
    ap.add_argument("--env-conf", default="", help=argparse.SUPPRESS)
    ap.add_argument("--outdir", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--selftest-scenario", choices=["basic", "random", "expandable"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        return worker_main(args)

    args.gpumemprof = find_gpumemprof(args.gpumemprof)
    if not args.gpumemprof:
        print("replay_fidelity: gpumemprof CLI not found (give --gpumemprof PATH)", file=sys.stderr)
        return 2
    args.gpumemprof = os.path.abspath(args.gpumemprof)
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="gpumemprof-fidelity-"))
    os.makedirs(workdir, exist_ok=True)
    t_start = time.perf_counter()

    if args.selftest:
        runs, checks = selftest(args, workdir)
        failed = [c for c in checks if not c[1]]
    else:
        sys.path.insert(0, HERE)
        import fidelity_workloads as fw
        workloads = [w for w in args.workloads.split(",") if w]
        unknown = [w for w in workloads if w not in fw.WORKLOADS]
        if unknown:
            print("replay_fidelity: unknown workload(s) %s (known: %s)" % (unknown, sorted(fw.WORKLOADS)),
                  file=sys.stderr)
            return 2
        confs = CONFS if args.confs is None else args.confs.split(";")
        print("gpumemprof: %s\nworkdir:    %s" % (args.gpumemprof, workdir), flush=True)
        jobs = [(w, c) for w in workloads for c in confs]
        runs = []
        for i, (w, c) in enumerate(jobs, 1):
            steps = max(1, int(round(fw.DEFAULT_STEPS[w] * args.scale)))
            runs.append(run_case(args, w, c, steps, workdir, i, len(jobs)))
        checks = []
        failed = [r for r in runs if r["status"] != "PASS"]

    wall = time.perf_counter() - t_start
    print_table(runs)
    env = next((r["worker"].get("environment") for r in runs if (r.get("worker") or {}).get("environment")), {})
    summary = {"runs": len(runs), "pass": sum(r["status"] == "PASS" for r in runs),
               "fail": sum(r["status"] == "FAIL" for r in runs),
               "invalid": sum(r["status"] == "INVALID" for r in runs),
               "error": sum(r["status"] == "ERROR" for r in runs), "wall_s": round(wall, 1)}
    if args.selftest:
        print("\nselftest expectations:")
        for name, ok, detail in checks:
            print("  %s  %s%s" % ("ok  " if ok else "FAIL", name, ("  (%s)" % detail) if detail else ""))
        summary["selftest_checks"] = [{"check": n, "ok": ok, "detail": d} for n, ok, d in checks]
    doc = {"tool": "scripts/gpu/replay_fidelity.py", "selftest": args.selftest, "tolerance": TOLERANCE,
           "gpumemprof": args.gpumemprof, "workdir": workdir, "environment": env, "summary": summary, "runs": runs}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True, default=str)
    print("\n%d runs: %d PASS, %d FAIL, %d INVALID, %d ERROR in %.1f s; results in %s"
          % (summary["runs"], summary["pass"], summary["fail"], summary["invalid"], summary["error"], wall, args.out))
    if env:
        print("environment: %s" % ", ".join("%s %s" % (k, v) for k, v in sorted(env.items())))
    print("\nMarkdown (README):\n")
    print(markdown_table(runs))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
