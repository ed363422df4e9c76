# SPDX-License-Identifier: MIT
"""Explicit torch.cuda.graph capture and replay."""
import torch

from common import Probe


def main():
    torch.manual_seed(0)
    p = Probe("cuda_graph")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    static_x = torch.randn(256, 1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            model(static_x)  # warm-up on a side stream, as the docs say
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        static_y = model(static_x)  # the captured line
    sums = []
    for i in range(5):
        static_x.copy_(torch.full((256, 1024), 0.01 * (i + 1), device="cuda"))
        p.step_begin()
        g.replay()
        p.step_end()
        sums.append(round(float(static_y.sum()), 3))
    p.sample("end")
    p.finish(sums=sums)


if __name__ == "__main__":
    main()
