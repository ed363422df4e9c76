# SPDX-License-Identifier: MIT
"""What the parts of the fidelity check share: settings, paths, the stat keys, the settings parser."""

import importlib.util
import os

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # scripts/gpu
SCRIPTS = os.path.dirname(HERE)
FIDELITY_SCRIPT = os.path.join(HERE, "replay_fidelity.py")  # also the workers' command
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


def load_converter():
    spec = importlib.util.spec_from_file_location("torch_snapshot_to_trace", CONVERTER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_conf(conf):
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


def tail(text, n=1500):
    return (text or "")[-n:]
