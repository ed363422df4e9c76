# SPDX-License-Identifier: MIT
"""The worker: a fresh process per run (PYTORCH_CUDA_ALLOC_CONF is read once, at start-up) that records
the caching allocator's history from before its first allocation, runs the workload, keeps
torch.cuda.memory_stats() and dumps the snapshot. Its results go to <outdir>/worker.json."""

import json
import os
import sys
import time
import traceback

from .common import DEVICE, HERE, STAT_KEYS


def _pick(stats):
    return {k: stats[k] for k in STAT_KEYS if k in stats}


def write_json(path, obj):
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
            from .selftest import worker_selftest  # the stand-in without torch
            worker_selftest(args, result)
        else:
            worker_torch(args, result)
        rc = 0
    except Exception:  # noqa: BLE001 - reported to the parent in the JSON
        result["error"] = traceback.format_exc()[-4000:]
        rc = 1
    result["worker_s"] = round(time.perf_counter() - t0, 3)
    write_json(out, result)
    return rc
