# SPDX-License-Identifier: MIT
"""A training loop that logs torch.cuda.max_memory_allocated() every step and resets the peak."""
import torch

from common import Probe


def main():
    torch.manual_seed(0)
    p = Probe("memlog")
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    opt = torch.optim.Adam(model.parameters())
    logged, losses = [], []
    for step in range(6):
        torch.cuda.reset_peak_memory_stats()
        x = torch.randn(256 * (step + 1), 2048, device="cuda")
        p.step_begin()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        p.step_end()
        logged.append(int(torch.cuda.max_memory_allocated()))  # what the program logs
        losses.append(round(float(loss), 5))
        if step == 3:
            p.sample("mid")
    p.sample("end")
    p.finish(logged=logged, losses=losses)


if __name__ == "__main__":
    main()
