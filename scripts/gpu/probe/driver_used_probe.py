# SPDX-License-Identifier: MIT
"""Which PyTorch step makes the driver take device memory that no allocation names: the driver's
used figure (cudaMemGetInfo) less PyTorch's reserved bytes, around a stream's creation, the first
matmul, a side-stream warm-up, a CUDA graph's capture, instantiation and replays, and a generate-
style loop. Prints one JSON line: [step, used MiB, used - reserved MiB]. Also says whether
cudaMemGetInfo may be called inside a stream capture (the capture must survive it)."""
import json
import sys

import torch

log = []


def mark(name):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    used = (total - free) >> 20
    log.append([name, used, used - (torch.cuda.memory_reserved() >> 20)])


def main():
    torch.zeros(1, device="cuda")
    mark("first tensor")
    s = torch.cuda.Stream()
    mark("a side stream")
    a = torch.randn(1024, 1024, device="cuda")
    a @ a
    mark("first matmul")
    torch.nn.functional.gelu(a)
    mark("first gelu")
    q = torch.randn(8, 12, 128, 64, device="cuda", dtype=torch.bfloat16)
    torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    mark("first attention (bf16)")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        torch.nn.functional.linear(a, a)
    mark("first bf16 linear (cuBLASLt)")
    torch.argmax(a, dim=-1)
    torch.topk(a, 4)
    mark("first argmax, topk")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    inp = torch.randn(64, 1024, device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(inp)
    torch.cuda.current_stream().wait_stream(s)
    mark("warm-up on the side stream")
    g = torch.cuda.CUDAGraph()
    inside = None
    with torch.cuda.graph(g):
        out = model(inp)
        try:
            free, total = torch.cuda.mem_get_info()
            inside = "ok"
        except Exception as e:  # noqa: BLE001
            inside = "error: %s" % e
    mark("captured and instantiated")
    g.replay()
    mark("first replay")
    g.replay()
    mark("second replay")
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        out2 = model(inp) * 2
    mark("second graph captured")
    g2.replay()
    mark("second graph replayed")
    del g, g2, out, out2
    torch.cuda.empty_cache()
    mark("graphs deleted, cache emptied")
    print(json.dumps({"steps": log, "mem_get_info_in_capture": inside}))


if __name__ == "__main__":
    sys.exit(main())
