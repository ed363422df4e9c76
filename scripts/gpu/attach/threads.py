# SPDX-License-Identifier: MIT
"""Four Python threads, each on a stream of its own, allocating and freeing at once (GIL released
in the kernels), tensors handed between streams with record_stream, PyTorch's raw allocation
calls, and two CUDA graphs sharing one private pool."""
import threading

import torch

from common import Probe


def worker(k, results):
    s = torch.cuda.Stream()
    g = torch.Generator(device="cuda").manual_seed(k)
    acc = 0.0
    with torch.cuda.stream(s):
        for i in range(40):
            a = torch.randn(512 + 64 * k, 512, device="cuda", generator=g)  # the worker's tensors
            b = (a @ a.T).relu_()
            acc += float(b.mean().item())
            del a, b
    s.synchronize()
    results[k] = round(acc, 2)


def graphs():
    x = torch.ones(256, 256, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        (x @ x).sum()
    torch.cuda.current_stream().wait_stream(s)
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1):
        y1 = (x @ x) * 2  # the first graph's line
    with torch.cuda.graph(g2, pool=g1.pool()):  # the same private pool
        y2 = (y1 @ x) + 1
    g1.replay()
    g2.replay()
    torch.cuda.synchronize()
    return float(y2.sum().item())


def main():
    p = Probe("threads")
    results = {}
    ts = [threading.Thread(target=worker, args=(k, results)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    # A tensor made on one stream and used on another: freed only once the other is done.
    side = torch.cuda.Stream()
    t = torch.ones(8 << 20, dtype=torch.uint8, device="cuda")
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.default_stream())
        u = t.float().sum()
        t.record_stream(side)
    del t
    torch.cuda.synchronize()
    raw = torch.cuda.caching_allocator_alloc(3 << 20)  # PyTorch's raw allocation
    torch.cuda.caching_allocator_delete(raw)
    p.sample("mid")
    total = graphs()
    p.sample("end")
    p.finish(workers=[results[k] for k in range(4)], side=float(u.item()), graphs=total)


if __name__ == "__main__":
    main()
