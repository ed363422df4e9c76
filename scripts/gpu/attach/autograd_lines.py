# SPDX-License-Identifier: MIT
"""Backward allocations named by their forward lines, and the kinds of memory at the peak: an MLP
whose forward lines are known (LINE_* markers) trained with AdamW (foreach off), whose parameter,
gradient and optimizer-state bytes are computed by hand (reported as `expect`)."""
import torch

from common import Probe, profiler_dump


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4096, 8192)
        self.fc2 = torch.nn.Linear(8192, 4096)

    def forward(self, x):
        h = self.fc1(x)  # LINE_FC1
        h = torch.nn.functional.gelu(h)  # LINE_GELU
        y = self.fc2(h)  # LINE_FC2
        return y


def main():
    torch.manual_seed(0)
    p = Probe("autograd_lines")
    model = Net().cuda()  # LINE_MODEL
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(64, 4096, device="cuda")
    losses = []
    for step in range(4):
        p.step_begin()
        loss = model(x).square().mean()  # LINE_LOSS
        loss.backward()  # LINE_BACKWARD
        opt.step()  # LINE_STEP
        opt.zero_grad(set_to_none=False)
        p.step_end()
        losses.append(round(float(loss.detach()), 6))
    p.sample("end")
    # A leak the program still holds when a report is asked for: the leak list names this line,
    # not PyTorch, though the allocator's frames are its innermost (attach_check).
    held = [torch.empty(3 << 20, device="cuda") for _ in range(4)]  # LINE_LEAK
    profiler_dump("held")
    del held
    params = sum(t.numel() * t.element_size() for t in model.parameters())
    p.finish(losses=losses, expect={"parameters": params, "gradients": params, "optimizer state": 2 * params})


if __name__ == "__main__":
    main()
