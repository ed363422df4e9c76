# SPDX-License-Identifier: MIT
"""What every attach-check workload reports: its own outputs, torch.cuda.memory_stats() and the
profiler's memory_stats at the same moments, the driver's used-memory figure (NVML) at those
moments, and its step times. One JSON line on stdout at the end."""
import ctypes
import json
import os
import time

import torch


def _c_api(name, restype, argtypes):
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None
    fn.restype, fn.argtypes = restype, argtypes
    return fn


_STATS = _c_api("gpumemprof_memory_stats", ctypes.c_size_t, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t])


_DUMP = _c_api("gpumemprof_dump", ctypes.c_int, [ctypes.c_char_p])


def profiler_dump(name):
    """Under the profiler: its reports now, as <GPUMEMPROF_OUTPUT's folder>/dump-<name>.*; 0 on
    success, None without the profiler."""
    if _DUMP is None:
        return None
    folder = os.path.dirname(os.environ.get("GPUMEMPROF_OUTPUT", "./x")) or "."
    return _DUMP(os.path.join(folder, "dump-" + name).encode())


def profiler_stats():
    """The preloaded library's memory_stats for the current device, else None."""
    if _STATS is None:
        return None
    buf = ctypes.create_string_buffer(1 << 16)
    _STATS(-1, buf, len(buf))
    return json.loads(buf.value.decode())


try:
    import pynvml
    pynvml.nvmlInit()
    _NVML = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0))
except Exception:  # noqa: BLE001 - NVML is optional
    _NVML = None


def driver_used():
    """Device memory in use as the driver counts it (NVML, as nvidia-smi), else total - free."""
    if _NVML is not None:
        return int(pynvml.nvmlDeviceGetMemoryInfo(_NVML).used)
    free, total = torch.cuda.mem_get_info()
    return int(total - free)


class Probe:
    def __init__(self, name):
        self.name = name
        self.samples = {}
        self.peak_used = 0
        self.step_ms = []
        self.outputs = {}
        self.t0 = None

    def used(self):
        torch.cuda.synchronize()
        self.peak_used = max(self.peak_used, driver_used())

    def sample(self, label):
        """torch's and the profiler's memory_stats at this moment, and the driver's figure."""
        torch.cuda.synchronize()
        self.used()
        self.samples[label] = {"torch": {k: int(v) for k, v in torch.cuda.memory_stats().items()},
                               "profiler": profiler_stats()}

    def step_begin(self):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def step_end(self):
        torch.cuda.synchronize()
        self.step_ms.append((time.perf_counter() - self.t0) * 1e3)
        self.used()

    def finish(self, **outputs):
        self.outputs.update(outputs)
        print(json.dumps({"workload": self.name, "outputs": self.outputs, "samples": self.samples,
                          "peak_used": self.peak_used, "step_ms": self.step_ms,
                          "max_memory_allocated": int(torch.cuda.max_memory_allocated()),
                          "memory_allocated": int(torch.cuda.memory_allocated())}), flush=True)
