# SPDX-License-Identifier: MIT
"""One run of the check: the worker records PyTorch (or a synthetic snapshot), the snapshot is
converted to a trace (scripts/torch_snapshot_to_trace.py), `gpumemprof replay` replays it with the
same settings, and the peaks are compared (judging)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

from .common import ALLOC_ENV, CONVERTER, DEVICE, FIDELITY_SCRIPT, STAT_KEYS, load_converter, tail
from .judging import judge, snapshot_diagnostics


def _slug(conf):
    return re.sub(r"[^A-Za-z0-9]+", "_", conf).strip("_") or "default"


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
    w = _run_worker(args, r, steps, scenario)
    if r["error"]:
        return _finish(r, label)
    trace_path = _convert(r, w["snapshot"])
    if r["error"]:
        return _finish(r, label)
    rep = _replay(args, r, trace_path, w)
    if r["error"]:
        return _finish(r, label)
    _compare(args, r, w, rep)
    return _finish(r, label)


def _worker_env(env_conf):
    """Our environment without anything that would change PyTorch's allocator, plus `env_conf`."""
    env = dict(os.environ)
    for k in ALLOC_ENV:
        env.pop(k, None)
    if env_conf:
        # Newer torch reads PYTORCH_ALLOC_CONF first; the same text in both is unambiguous.
        env["PYTORCH_CUDA_ALLOC_CONF"] = env["PYTORCH_ALLOC_CONF"] = env_conf
    if "gpumemprof" in env.get("LD_PRELOAD", ""):
        env.pop("LD_PRELOAD")  # PyTorch's own allocator is what is measured here
    env["PYTHONHASHSEED"] = "0"
    return env


def _run_worker(args, r, steps, scenario):
    """Runs the worker process; returns its worker.json (r["error"] set when it failed)."""
    case_dir, env_conf = r["dir"], r["env_conf"]
    cmd = [args.python, FIDELITY_SCRIPT, "--worker", "--workload", r["workload"], "--conf", r["conf"],
           "--env-conf", env_conf, "--outdir", case_dir, "--steps", str(steps), "--max-entries",
           str(args.max_entries)]
    if scenario:
        cmd += ["--selftest-scenario", scenario]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=_worker_env(env_conf), capture_output=True, text=True, timeout=args.timeout)
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
    r["torch"] = w.get("torch_stats") or {}
    if r["worker_rc"] != 0 or w.get("error") or not w.get("snapshot"):
        r["error"] = "worker failed (rc %s): %s" % (r["worker_rc"], tail(w.get("error") or worker_stderr))
    return w


def _convert(r, snap_path):
    """The snapshot as a trace beside it; returns the trace's path (r["error"] set on failure)."""
    r["snapshot_bytes"] = os.path.getsize(snap_path)
    trace_path = os.path.join(r["dir"], "trace.gmt")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, CONVERTER, snap_path, trace_path], capture_output=True, text=True)
    r["convert_s"] = round(time.perf_counter() - t0, 2)
    r["convert_output"] = p.stdout.strip()
    if p.returncode != 0:
        r["error"] = "converter failed (rc %d): %s" % (p.returncode, tail(p.stderr))
        return trace_path
    m = re.search(r"(\d+) events on (\d+) device\(s\), (\d+) blocks live before recording, (\d+) entries skipped",
                  p.stdout)
    if m:
        r["converted"] = {"events": int(m.group(1)), "devices": int(m.group(2)), "live_blocks": int(m.group(3)),
                          "skipped_entries": int(m.group(4))}
    return trace_path


def _replay(args, r, trace_path, w):
    """`gpumemprof replay --json` of the trace; keeps device DEVICE's figures in r["replay"] and
    returns the whole output (r["error"] set on failure)."""
    rcmd = [args.gpumemprof, "replay", trace_path, "--conf", r["env_conf"], "--json"]
    if w.get("capacity_bytes"):
        rcmd += ["--capacity", str(w["capacity_bytes"])]
    r["replay_command"] = rcmd
    t0 = time.perf_counter()
    p = subprocess.run(rcmd, capture_output=True, text=True)
    r["replay_s"] = round(time.perf_counter() - t0, 3)
    if p.returncode != 0:
        r["error"] = "gpumemprof replay failed (rc %d): %s" % (p.returncode, tail(p.stderr))
        return None
    if p.stderr.strip():
        r["notes"].append(("info", "replay said: " + tail(p.stderr.strip(), 400)))
    try:
        rep = json.loads(p.stdout)
        dev = next(d for d in rep["devices"] if d["device"] == DEVICE)
    except (ValueError, KeyError, StopIteration) as e:
        r["error"] = "unexpected replay output (%s): %s" % (e, tail(p.stdout, 400))
        return None
    ms = dev["memory_stats"]
    r["replay"] = {k: ms.get(k) for k in STAT_KEYS if k in ms}
    r["replay"].update({"events": rep.get("events"), "live_blocks": rep.get("live_blocks"),
                        "unmatched_frees": rep.get("unmatched_frees"), "capacity": dev.get("capacity"),
                        "failed_allocs": dev.get("replay", {}).get("failed_allocs"),
                        "skipped_frees": dev.get("replay", {}).get("skipped_frees"),
                        "address_mismatches": dev.get("replay", {}).get("address_mismatches"),
                        "first_mismatch": dev.get("replay", {}).get("first_mismatch"),
                        "recorded_reserved_peak": dev.get("recorded", {}).get("reserved_bytes_peak")})
    return rep


def _compare(args, r, w, rep):
    """The notes that decide whether the peaks can be compared (snapshot_diagnostics and the replay's own)."""
    ts, rp = r["torch"], r["replay"]
    snap = load_converter().load_snapshot(w["snapshot"])
    facts, notes = snapshot_diagnostics(snap, DEVICE, args.max_entries, r["env_conf"], ts, w.get("pre_stats") or {})
    r["facts"] = facts
    r["notes"].extend(notes)
    backend = ((w.get("environment") or {}).get("allocator_backend"))
    if backend not in (None, "?", "native"):
        r["notes"].append(("invalid", "PyTorch used the %r allocator backend, not its caching allocator" % backend))
    if rp.get("failed_allocs"):
        r["notes"].append(("invalid", "%d requests ran out of memory in the replay (capacity %s)"
                           % (rp["failed_allocs"], rp.get("capacity"))))
    if rp.get("address_mismatches"):
        # Segments are replayed at their recorded addresses, so a replay that follows PyTorch hands
        # every block out where PyTorch did: the first other address is where the two part.
        m = rp.get("first_mismatch") or {}
        r["notes"].append(("info", "%d allocations replayed at another address than recorded; the first: request "
                                   "#%s of %s B (rounded %s B) at 0x%x, recorded at 0x%x"
                           % (rp["address_mismatches"], m.get("alloc_index"), m.get("requested"), m.get("rounded"),
                              m.get("replayed_ptr") or 0, m.get("recorded_ptr") or 0)))
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


def _finish(r, label):
    """The verdict, and one line (with its notes) on stdout."""
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
