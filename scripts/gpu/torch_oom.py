# SPDX-License-Identifier: MIT
"""GPU check: a PyTorch program that runs out of memory under the profiler, catches the error and
goes on. Allocates 512 MiB tensors until PyTorch raises; run it with a memory fraction in
GPUMEMPROF_ALLOC_CONF so that the limit comes quickly, and with PYTORCH_NO_CUDA_MEMORY_CACHING=1
so that each tensor is one cudaMalloc. Prints one JSON line."""
import json

import torch

CHUNK = 512 * 1024 * 1024


def grab(held):
    # One named frame per request: the report's OOM stack should reach torch.empty from here.
    held.append(torch.empty(CHUNK, dtype=torch.uint8, device="cuda"))


def main():
    held, error = [], None
    try:
        for _ in range(1000):
            grab(held)
    except RuntimeError as e:  # torch.OutOfMemoryError is a RuntimeError
        error = e
    got = len(held)
    held.clear()
    # The program goes on: the memory it freed is usable again.
    again = torch.ones(4 * CHUNK // 4, dtype=torch.float32, device="cuda").sum().item()
    print(json.dumps({"allocated_before_oom": got, "error_type": type(error).__name__ if error else None,
                      "error": str(error).splitlines()[0][:300] if error else None,
                      "recovered_sum": again}))


if __name__ == "__main__":
    main()
