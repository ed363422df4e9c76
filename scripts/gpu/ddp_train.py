# SPDX-License-Identifier: MIT
"""A small DDP training run for the two-GPU check (multi_gpu_check.py): started by
`torchrun --nproc_per_node=2`, NCCL backend, one GPU per rank. Deterministic (fixed seeds, fixed
data), so the losses with and without the preload can be compared number for number. Each rank
prints one JSON line: its rank, device, losses, and PyTorch's own memory figures for its device."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    # DDP_BACKEND=gloo and DDP_ONE_DEVICE=1: every rank on device 0 (one GPU, gloo_check.py).
    dist.init_process_group(os.environ.get("DDP_BACKEND", "nccl"))
    rank = dist.get_rank()
    local = 0 if os.environ.get("DDP_ONE_DEVICE") == "1" else int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True, warn_only=True)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 10)).cuda(local)
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator(device="cpu").manual_seed(100 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(256, 1024, generator=gen).cuda(local, non_blocking=True)
        y = torch.randint(0, 10, (256,), generator=gen).cuda(local, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        # The loss all ranks agree on: the mean over ranks.
        t = loss.detach().clone()
        dist.all_reduce(t)
        losses.append(t.item() / dist.get_world_size())
    torch.cuda.synchronize(local)
    out = {
        "rank": rank,
        "device": local,
        "losses": losses,
        "max_memory_reserved": torch.cuda.max_memory_reserved(local),
        "max_memory_allocated": torch.cuda.max_memory_allocated(local),
        "num_device_alloc": torch.cuda.memory_stats(local).get("num_device_alloc", 0),
        "nccl_version": ".".join(str(v) for v in torch.cuda.nccl.version()),
        "torch": torch.__version__,
    }
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
