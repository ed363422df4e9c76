# SPDX-License-Identifier: MIT
"""PyTorch beside other users of the device in one process: CuPy with its own memory pool,
arrays passed both ways by DLPack, and a one-rank NCCL process group (NCCL's own buffers,
cuMem-mapped by default) doing an all_reduce."""
import os

import cupy
import torch
import torch.distributed as dist

from common import Probe


def main():
    torch.manual_seed(0)
    p = Probe("mixed")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    x = torch.randn(1024, 1024, device="cuda")  # a tensor
    c = cupy.from_dlpack(x)  # the same memory, seen by CuPy
    y = cupy.arange(1 << 22, dtype=cupy.float32)  # CuPy's own pool
    t = torch.from_dlpack(y)  # and back
    dist.all_reduce(x)
    z = (x * 2).sum() + t.sum()
    p.sample("mid")
    total = round(float(z.item()), 1)
    csum = round(float(c.sum()), 1)
    del c, y, t
    cupy.get_default_memory_pool().free_all_blocks()
    dist.destroy_process_group()
    torch.cuda.synchronize()
    p.sample("end")
    p.finish(total=total, cupy_sum=csum)


if __name__ == "__main__":
    main()
