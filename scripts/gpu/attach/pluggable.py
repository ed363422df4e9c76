# SPDX-License-Identifier: MIT
"""A program's own allocator in PyTorch: torch.cuda.MemPool(allocator=CUDAPluggableAllocator)
(the native allocator keeps the rest), or the whole process's allocator swapped for it.

    pluggable.py pool_plain | pool_vmm | pool_async | pool_managed | global_plain

pool_*: a small model's forward and backward with its weights and activations in the custom pool
(`plain`: cudaMalloc with the static cudart; `vmm`: cuMemCreate/cuMemMap, as a serving engine's
sleep mode does; `async`: cudaMallocAsync; `managed`: cudaMallocManaged), other tensors outside it. global_plain: change_current_allocator before any CUDA
use (PyTorch keeps no statistics then). PLUGGABLE_SO names the allocator library."""
import os
import sys

import torch

from common import Probe


def model_step(n, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    w1 = torch.randn(1024, 1024, device="cuda", generator=g, requires_grad=True)
    w2 = torch.randn(1024, 256, device="cuda", generator=g, requires_grad=True)
    x = torch.randn(n, 1024, device="cuda", generator=g)
    loss = torch.relu(x @ w1).matmul(w2).square().mean()  # ALLOC_LINE
    loss.backward()
    return float(loss.item()), float(w1.grad.abs().sum().item()), [w1, w2, x]


def main():
    mode = sys.argv[1]
    so = os.environ["PLUGGABLE_SO"]
    kind = mode.split("_")[1]
    alloc = torch.cuda.memory.CUDAPluggableAllocator(so, kind + "_malloc", kind + "_free")
    if mode.startswith("global"):
        torch.cuda.memory.change_current_allocator(alloc)
        outs = []
        for step in range(3):
            loss, gsum, keep = model_step(512, step)
            outs.append([round(loss, 3), round(gsum, 1)])
            del keep
        torch.cuda.synchronize()
        print('{"workload": "pluggable", "outputs": {"steps": %s}, "samples": {}, "peak_used": 0, "step_ms": [], '
              '"max_memory_allocated": null, "memory_allocated": null}' % outs, flush=True)
        return
    p = Probe("pluggable_" + mode)
    pool = torch.cuda.MemPool(allocator=alloc.allocator())
    with torch.cuda.use_mem_pool(pool):
        loss, gsum, kept = model_step(512, 1)  # the weights and activations in the custom pool
    outside = torch.ones(8 << 20, dtype=torch.uint8, device="cuda")
    p.sample("mid")
    total = int(outside.sum().item())
    del kept
    del pool
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    p.sample("end")
    p.finish(loss=round(loss, 3), grad=round(gsum, 1), total=total)


if __name__ == "__main__":
    main()
