# SPDX-License-Identifier: MIT
"""Whether a recording can be compared with its replay (snapshot_diagnostics), and the verdict (judge)."""

import collections
import math

from .common import MiB, TOLERANCE, parse_conf


def rel_diff(ours, theirs):
    if theirs is None or ours is None:
        return None
    if theirs == 0:
        return 0.0 if ours == 0 else math.inf
    return (ours - theirs) / theirs


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


def check_settings(conf, settings):
    """Did PyTorch apply `conf`? Compares the snapshot's allocator_settings with what conf asks."""
    if not isinstance(settings, dict) or not settings:
        return None, "snapshot has no allocator_settings: settings not verified"
    problems = []
    want = parse_conf(conf)
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
    _stream_notes(entries, facts, notes)
    _deferred_free_notes(entries, facts, notes)
    _address_order_notes(entries, facts, notes)
    _settings_notes(snap, device, counts, conf, torch_stats, facts, notes)
    _count_notes(entries, counts, torch_stats, pre_stats, facts, notes)
    return facts, notes


def _stream_notes(entries, facts, notes):
    streams = sorted({e.get("stream") for e in entries if e.get("action") in ("alloc", "segment_alloc")},
                     key=lambda s: (s is None, s))
    facts["streams"] = len(streams)
    if len(streams) > 1:
        notes.append(("info", "%d streams allocate; the replay keeps PyTorch's per-stream pools (a free block "
                              "is reused only on its own stream)" % len(streams)))


def _deferred_free_notes(entries, facts, notes):
    """A free completed later than right after its request: record_stream (events) deferred it."""
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


def _address_order_notes(entries, facts, notes):
    """PyTorch breaks best-fit ties between equal free blocks by address. The replay puts each
    segment at the address the trace recorded for it (while its size matches and the range is
    free), so ties resolve alike as long as the replay follows the recording; counted here
    because once it departs (the replay's address_mismatches), later segments fall back to the
    simulated increasing order. Only order within one pool of one stream matters."""
    seg_addrs = [e for e in entries if e.get("action") == "segment_alloc"]
    inversions, top = 0, {}
    for e in seg_addrs:
        key, a = (e.get("stream"), e.get("size") == 2 * MiB), e.get("addr") or 0
        if a < top.get(key, -1):
            inversions += 1
        top[key] = max(top.get(key, -1), a)
    facts["segment_address_inversions"] = inversions
    if inversions:
        notes.append(("info", "%d of %d segments got a lower address than an earlier one: the replay places "
                              "segments at their recorded addresses, so best-fit ties break as on the device "
                              "until the replay departs from the recording" % (inversions, len(seg_addrs))))


def _settings_notes(snap, device, counts, conf, torch_stats, facts, notes):
    """What the replay cannot reproduce (expandable segments it was not given, private pools, OOMs,
    retries), and whether PyTorch ran with the requested settings."""
    settings = snap.get("allocator_settings") or {}
    segments = [s for s in (snap.get("segments") or []) if isinstance(s, dict) and s.get("device", 0) == device]
    expandable = bool(counts.get("segment_map") or counts.get("segment_unmap")
                      or any(s.get("is_expandable") for s in segments)
                      or (isinstance(settings, dict) and settings.get("expandable_segments")))
    facts["expandable"] = expandable
    if expandable and parse_conf(conf).get("expandable_segments") != "True":
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


def _count_notes(entries, counts, torch_stats, pre_stats, facts, notes):
    """Recorded from the first allocation on, the trace must hold every allocation, free request
    (allocation.freed counts requests) and cudaMalloc/cudaFree of the process; else the blocks live
    at the start are replayed first."""
    from_first = (pre_stats.get("allocation.all.allocated", 0) == 0
                  and pre_stats.get("reserved_bytes.all.current", 0) == 0)
    facts["recorded_from_first_alloc"] = from_first
    if not from_first:
        notes.append(("info", "recording began after %d allocations with %d bytes reserved: blocks live then "
                              "are replayed first (address order); cached free blocks of that time are not "
                              "known, so the start state may differ"
                      % (pre_stats.get("allocation.all.allocated", 0),
                         pre_stats.get("reserved_bytes.all.current", 0))))
        return
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
