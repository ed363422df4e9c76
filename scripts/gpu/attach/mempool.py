# SPDX-License-Identifier: MIT
"""torch.cuda.MemPool: tensors allocated into a private pool, then the pool released."""
import torch

from common import Probe


def main():
    p = Probe("mempool")
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        a = torch.ones(64 << 20, dtype=torch.uint8, device="cuda")  # the pool's tensor
        b = torch.zeros(3 << 20, dtype=torch.float32, device="cuda")
    c = torch.ones(16 << 20, dtype=torch.uint8, device="cuda")  # outside the pool
    p.sample("mid")
    total = int(a.sum().item()) + int(b.sum().item()) + int(c.sum().item())
    del a, b
    del pool
    torch.cuda.synchronize()
    p.sample("end")
    p.finish(total=total)


if __name__ == "__main__":
    main()
