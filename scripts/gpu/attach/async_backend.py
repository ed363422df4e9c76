# SPDX-License-Identifier: MIT
"""PyTorch on its stream-ordered backend (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, set by
the check): an MLP's training steps, a side stream's tensors, then the cache emptied. The native
allocator is not there to attach to; its cudaMallocAsync calls are what the profiler sees."""
import torch

from common import Probe


def main():
    torch.manual_seed(0)
    p = Probe("async_backend")
    model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 2048)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(1024, 2048, device="cuda")
    losses = []
    for step in range(6):
        p.step_begin()
        loss = model(x).square().mean()  # the forward line
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        p.step_end()
        losses.append(round(float(loss), 4))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = torch.ones(32 << 20, dtype=torch.uint8, device="cuda")  # the side stream's tensor
        total = int(y.sum().item())
    torch.cuda.synchronize()
    p.sample("mid")
    del y
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    p.sample("end")
    p.finish(losses=losses, total=total, reserved_end=int(torch.cuda.memory_reserved()))


if __name__ == "__main__":
    main()
