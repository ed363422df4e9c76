# SPDX-License-Identifier: MIT
"""GPU check (2): the headline PyTorch training loop of h200-baselines.md.

8-layer transformer, d_model 1024, 16 heads, batch 8 x 512 tokens, vocab 32000, bf16 autocast,
AdamW. Prints one JSON line: losses, median step time, torch's own peak figures (meaningful only
with its caching allocator on). Run it under the profiler with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so
that every tensor allocation is a cudaMalloc/cudaFree that our pool serves.
"""
import json
import os
import sys
import time

import ctypes

import torch
import torch.nn as nn


def c_api(name, restype, argtypes):
    """A gpumemprof_* function of the preloaded libgpumemprof.so, else None."""
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def profiler_stats():
    """memory_stats from libgpumemprof.so when it is preloaded (its C API), else None."""
    fn = c_api("gpumemprof_memory_stats", ctypes.c_size_t, [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t])
    if fn is None:
        return None
    buf = ctypes.create_string_buffer(1 << 16)
    fn(-1, buf, len(buf))
    return json.loads(buf.value.decode())


def stack_depth_setter():
    """gpumemprof_set_stack_depth from the preloaded library, else None."""
    return c_api("gpumemprof_set_stack_depth", ctypes.c_int, [ctypes.c_int])


def main():
    steps = int(os.environ.get("STEPS", "6"))
    # AB_STACK_DEPTH=n: stack capture on (depth n) and off in alternate steps of this one process,
    # in the order on, off, off, on, ... so that both halves see the same GPU clocks, CPU and
    # memory state; the step times of each half are reported separately.
    ab_depth = int(os.environ.get("AB_STACK_DEPTH", "0"))
    set_depth = stack_depth_setter() if ab_depth > 0 else None
    torch.manual_seed(0)
    if os.environ.get("DETERMINISTIC") == "1":
        # Loss comparisons between allocators need bit-reproducible kernels (embedding backward
        # uses atomics otherwise).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    vocab, d, heads, layers, batch, seq = 32000, 1024, 16, 8, 8, 512
    # LOOP=big: the loop sized to ~60% of an H200 (issue 9): 104 blocks of Linear
    # 4096->16384->4096 in bf16 on 8192 tokens, SGD.
    big = os.environ.get("LOOP") == "big"
    # SIDE_STREAM=1: a live non-blocking stream does a little work every step (the pool must then
    # fence freed blocks instead of reusing them at once).
    side = torch.cuda.Stream() if os.environ.get("SIDE_STREAM") == "1" else None

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d, vocab)

        def forward(self, x):
            return self.head(self.enc(self.emb(x)))

    class Big(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(4096, 16384), nn.GELU(), nn.Linear(16384, 4096))
                                        for _ in range(104))

        def forward(self, x):
            for b in self.blocks:
                x = x + b(x)
            return x

    if big:
        model = Big().to(dev, dtype=torch.bfloat16)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        data = [None] * steps
    else:
        model = Model().to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        gen = torch.Generator(device="cpu").manual_seed(1)
        data = [torch.randint(0, vocab, (batch, seq + 1), generator=gen) for _ in range(steps)]
    losses, times, enqueue, device_allocs = [], [], [], []
    stacks_on = []
    for i in range(steps):
        on = (i % 4) in (0, 3)
        if set_depth:
            set_depth(ab_depth if on else 0)
        stacks_on.append(on)
        if big:
            x = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
        else:
            x = data[i][:, :-1].to(dev)
            y = data[i][:, 1:].to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if side is not None:
            with torch.cuda.stream(side):
                (torch.ones(1 << 20, device=dev) * 2).sum()
        if big:
            loss = model(x).float().pow(2).mean()
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
                loss = nn.functional.cross_entropy(out.float().view(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        enqueue.append(time.perf_counter() - t0)  # the host's share: every launch of the step issued
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        st = profiler_stats()
        if st:
            device_allocs.append(st["num_device_alloc"])
    timed = sorted(times[1:])  # the first step warms up
    queued = sorted(enqueue[1:])
    ab = None
    if set_depth:
        # The first two steps warm up (one of each kind).
        on_ms = sorted(1000 * t for t, o in zip(times[2:], stacks_on[2:]) if o)
        off_ms = sorted(1000 * t for t, o in zip(times[2:], stacks_on[2:]) if not o)
        if on_ms and off_ms:
            ab = {"depth": ab_depth, "on_ms_median": on_ms[len(on_ms) // 2],
                  "off_ms_median": off_ms[len(off_ms) // 2], "steps_each": [len(on_ms), len(off_ms)],
                  "ratio": on_ms[len(on_ms) // 2] / off_ms[len(off_ms) // 2]}
    print(json.dumps({
        "stacks_ab": ab,
        "losses": losses,
        "step_ms_median": 1000 * timed[len(timed) // 2],
        # Time until the host had issued the whole step; near step_ms, the step is bound by the host.
        "enqueue_ms_median": 1000 * queued[len(queued) // 2],
        "step_ms_all": [round(1000 * t, 3) for t in times],
        "torch_max_allocated": torch.cuda.max_memory_allocated(),
        "torch_max_reserved": torch.cuda.max_memory_reserved(),
        "torch_num_device_alloc": torch.cuda.memory_stats().get("num_device_alloc", 0),
        "loop": "big" if big else "readme",
        "side_stream": side is not None,
        "caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") != "1",
        "profiler_device_allocs_after_each_step": device_allocs,
    }))


if __name__ == "__main__":
    sys.exit(main())
