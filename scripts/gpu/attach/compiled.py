# SPDX-License-Identifier: MIT
"""torch.compile, default mode and mode="reduce-overhead" (CUDA graph trees, private pools)."""
import sys

import torch

from common import Probe


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(2048, 8192)
        self.b = torch.nn.Linear(8192, 2048)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x)))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "default"
    torch.manual_seed(0)
    p = Probe("compile_" + mode)
    model = MLP().cuda()
    fn = torch.compile(model, mode=None if mode == "default" else mode)
    x = torch.randn(512, 2048, device="cuda")
    sums = []
    with torch.no_grad():
        for i in range(8):
            p.step_begin()
            y = fn(x)  # the compiled call
            p.step_end()
            sums.append(round(float(y.float().sum()), 2))
            if i == 5:
                p.sample("mid")
    p.sample("end")
    p.finish(sums=sums)


if __name__ == "__main__":
    main()
