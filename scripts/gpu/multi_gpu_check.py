# SPDX-License-Identifier: MIT
"""Two-GPU checks (device kind nvidia-h200-x2), called from gpu_check.py (--only ddp,twodev):

ddp:    `torchrun --nproc_per_node=2` DDP and FSDP2 training (ddp_train.py, NCCL) with and without
        the preload (PyTorch's allocator attached, the default), per-rank reports via
        GPUMEMPROF_OUTPUT=...rank-%r-%p. Passes when both runs end within the timeout with exit
        status 0, the losses are the same step for step, each rank wrote one report for its own
        device, attached to PyTorch's allocator, whose reserved peak is that rank's
        torch.cuda.max_memory_reserved(), with NCCL's own memory under NCCL in the device
        accounting, and `gpumemprof merge` of the two names both ranks. Run with NCCL's defaults
        (cuMem buffers) and, for DDP, NCCL_CUMEM_ENABLE=0 (cudaMalloc + legacy IPC handles).
twodev: one process allocating on cuda:0 and cuda:1 (two_devices.py): one `devices` entry per
        device with exactly the bytes the program allocated there.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20


def _gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def _reports(out_dir):
    reps = []
    for name in sorted(os.listdir(out_dir)):
        if name.endswith(".json"):
            with open(os.path.join(out_dir, name)) as f:
                reps.append(json.load(f))
    return reps


def _run_ddp(lib, steps, env_extra, preload, timeout):
    out_dir = tempfile.mkdtemp(prefix="gpumemprof-ddp-")
    env = dict(os.environ)
    env.update(env_extra)
    env["GPUMEMPROF_OUTPUT"] = os.path.join(out_dir, "rank-%r-%p")
    if preload:
        env["LD_PRELOAD"] = lib
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(HERE, "ddp_train.py"), str(steps)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        so = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        se = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.perf_counter() - t0
    ranks = {}
    for line in so.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                d = json.loads(line)
                ranks[d["rank"]] = d
            except (ValueError, KeyError):
                pass
    return {"rc": rc, "ranks": ranks, "reports": _reports(out_dir), "stderr": se, "wall": wall, "dir": out_dir}


def _nccl_bytes(dev):
    """NCCL's share of a device's accounting (at its peak and at exit), by library."""
    acc = dev.get("device_accounting") or {}
    got = {}
    for when, m in (("peak", acc), ("exit", acc.get("at_exit") or {})):
        got[when] = sum(v for k, v in (m.get("by_library") or {}).items() if "nccl" in k.lower())
    return got


def _merge_ranks(cli, out_dir):
    files = [os.path.join(out_dir, n) for n in sorted(os.listdir(out_dir)) if n.endswith(".json")]
    if not cli or not files:
        return []
    m = subprocess.run([cli, "merge", "--json"] + files, capture_output=True, text=True, timeout=300)
    try:
        return sorted(r.get("rank") for r in json.loads(m.stdout).get("ranks", []))
    except ValueError:
        return []


def check_ddp(record, lib, steps=30, timeout=900, artifacts=None):
    if _gpus() < 2:
        record("ddp_two_gpus", False, skipped="fewer than 2 GPUs here")
        return
    cli = os.path.join(os.path.dirname(lib), "gpumemprof")
    for label, extra in (("nccl_defaults", {}), ("nccl_cumem_off", {"NCCL_CUMEM_ENABLE": "0"}),
                         ("fsdp2", {"DDP_MODE": "fsdp2"})):
        plain = _run_ddp(lib, steps, extra, False, timeout)
        prof = _run_ddp(lib, steps, extra, True, timeout)
        if artifacts:
            dst = os.path.join(artifacts, "ddp-" + label)
            shutil.copytree(prof["dir"], dst, dirs_exist_ok=True)
        losses_plain = [plain["ranks"].get(r, {}).get("losses") for r in (0, 1)]
        losses_prof = [prof["ranks"].get(r, {}).get("losses") for r in (0, 1)]
        diff = None
        if all(losses_plain) and all(losses_prof):
            diff = max(abs(a - b) for lp, lq in zip(losses_plain, losses_prof) for a, b in zip(lp, lq))
        per_rank = []
        reports_ok = len(prof["reports"]) == 2
        for rep in prof["reports"]:
            # The rank's own device: the one its pool allocated on.
            used = sorted({d["device"] for d in rep.get("devices", [])
                           if d.get("memory_stats", {}).get("allocation.all.allocated", 0) > 0})
            rank = next((r for r, d in prof["ranks"].items() if d.get("device") in used), None)
            torch_peak = prof["ranks"].get(rank, {}).get("max_memory_reserved") if rank is not None else None
            peak = sum(d["memory_stats"].get("allocated_bytes.all.peak", 0) for d in rep.get("devices", [])
                       if d["device"] in used)
            pt = {}
            for d in rep.get("devices", []):
                for kind, c in (d.get("passthrough") or {}).items():
                    pt[kind] = pt.get(kind, 0) + c.get("calls", 0)
            # Attached, a device has PyTorch's entry and, for other libraries' cudaMalloc, ours.
            mine = [d for d in rep.get("devices", []) if d["device"] in used and d.get("allocator") == "pytorch"]
            attached = len(mine) == 1
            reserved = mine[0]["memory_stats"].get("reserved_bytes.all.peak", 0) if mine else 0
            nccl = {}
            for d in rep.get("devices", []):
                if d["device"] in used and d.get("device_accounting"):
                    for k, v in _nccl_bytes(d).items():
                        nccl[k] = max(nccl.get(k, 0), v)
            entry = {"pid": rep.get("pid"), "devices_used": used, "rank": rank, "report_peak_allocated": peak,
                     "torch_max_memory_reserved": torch_peak, "attached": attached,
                     "report_reserved_peak": reserved, "nccl_bytes": nccl,
                     "ipc_refused": sum(d.get("ipc_refused", 0) for d in rep.get("devices", [])),
                     "driver_errors": [d.get("driver_errors") for d in rep.get("devices", []) if d.get("driver_errors")],
                     "passthrough_calls": pt}
            per_rank.append(entry)
            reports_ok = reports_ok and len(used) == 1 and rank is not None and torch_peak is not None \
                and attached and reserved == torch_peak and nccl.get("peak", 0) > 0
        devices_distinct = len({tuple(e["devices_used"]) for e in per_rank}) == len(per_rank)
        warnings = [l for l in prof["stderr"].splitlines() if "gpumemprof:" in l][:20]
        merged = _merge_ranks(cli, prof["dir"])
        ok = (plain["rc"] == 0 and prof["rc"] == 0 and diff is not None and diff <= 1e-6 and reports_ok
              and devices_distinct and merged == [0, 1])
        record("ddp_two_gpus_" + label, ok, rc_plain=plain["rc"], rc_preload=prof["rc"],
               steps=steps, max_loss_difference=diff, final_loss=(losses_prof[0] or [None])[-1],
               wall_plain_s=round(plain["wall"], 2), wall_preload_s=round(prof["wall"], 2),
               reports=len(prof["reports"]), per_rank=per_rank, merged_ranks=merged,
               nccl=(prof["ranks"].get(0) or {}).get("nccl_version"), gpumemprof_warnings=warnings,
               stderr=(prof["stderr"][-1500:] if not ok else ""),
               stderr_plain=(plain["stderr"][-800:] if plain["rc"] != 0 else ""))


def check_two_devices(record, lib):
    if _gpus() < 2:
        record("one_process_two_devices", False, skipped="fewer than 2 GPUs here")
        return
    out_dir = tempfile.mkdtemp(prefix="gpumemprof-2dev-")
    env = dict(os.environ, LD_PRELOAD=lib, GPUMEMPROF_OUTPUT=os.path.join(out_dir, "prof-%p"))
    p = subprocess.run([sys.executable, os.path.join(HERE, "two_devices.py")], env=env, capture_output=True,
                       text=True, timeout=600)
    reps = _reports(out_dir)
    rep = reps[-1] if reps else {}
    plan = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            plan = {int(k): v for k, v in json.loads(line)["plan"].items()}
    got, ok = {}, p.returncode == 0 and len(reps) == 1 and bool(plan)
    for dev, sizes in plan.items():
        entries = [d for d in rep.get("devices", []) if d["device"] == dev
                   and d.get("memory_stats", {}).get("allocation.all.allocated", 0) > 0]
        ms = entries[0]["memory_stats"] if len(entries) == 1 else {}
        got[dev] = {"entries": len(entries), "peak_allocated": ms.get("allocated_bytes.all.peak"),
                    "allocations": ms.get("allocation.all.allocated"),
                    "allocated_now": ms.get("allocated_bytes.all.current")}
        ok = ok and len(entries) == 1 and ms.get("allocated_bytes.all.peak") == sum(sizes) \
            and ms.get("allocation.all.allocated", 0) >= len(sizes) and ms.get("allocated_bytes.all.current") == 0
    record("one_process_two_devices", ok, rc=p.returncode, expected={d: sum(s) for d, s in plan.items()}, got=got,
           stderr=p.stderr[-800:] if not ok else "")
