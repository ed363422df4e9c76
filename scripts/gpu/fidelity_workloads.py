# SPDX-License-Identifier: MIT
"""PyTorch workloads for the replay-fidelity check (scripts/gpu/replay_fidelity.py, issue 4).

Each workload is a function (device, steps) -> dict of small facts about the run (losses, sizes),
seeded so that two runs make the same requests. They only use the default stream and never call
record_stream, empty_cache or CUDA graphs, so everything they do to the caching allocator is in the
snapshot trace. Sized to take a few seconds each on one H200 (torch import and CUDA start-up
dominate the ~10 s per run).

  training          4-layer transformer encoder LM, d_model 512, batch 8 x 256, vocab 8192, bf16
                    autocast, AdamW: the steady forward/backward/optimizer pattern.
  inference_varlen  4-layer bf16 transformer forward under no_grad over random (batch, seq) shapes,
                    seq 37..2000 tokens, batch 1..8, keeping the last few outputs alive: requests of
                    ever-different sizes that fragment the large pool.
  growing_cache     a KV-cache of 4 layers (K and V, batch 8, 16 heads, head dim 128, bf16) that
                    grows by torch.cat of 1..48 tokens every step with a small attention on it and
                    drops to its newest 1024 tokens once it passes 4096 (about every 125 steps):
                    ever-larger allocations (up to ~130 MiB, so max_split_size_mb:64 matters) whose
                    predecessors are freed right after.
  resnet            ResNet-50 (torchvision, or the same bottleneck stack built here without it),
                    batch 16 at 224 x 224, fp32, SGD with momentum: a convolutional net's mix of
                    many small weights and BN buffers and large activations, whose sizes fall in
                    every rounding class of roundup_power2_divisions.

torch is imported inside the functions: the parent process of the check imports this module's
names without torch.
"""

import random

# Default step counts (the parent can scale them).
DEFAULT_STEPS = {
    "training": 30,
    "inference_varlen": 80,
    "growing_cache": 400,
    "resnet": 12,
}


def _encoder_lm(vocab, d_model, heads, layers):
    import torch.nn as nn

    class EncoderLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d_model)
            layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, x):
            return self.head(self.enc(self.emb(x)))

    return EncoderLM()


def training(device, steps):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    vocab, d_model, heads, layers, batch, seq = 8192, 512, 8, 4, 8, 256
    model = _encoder_lm(vocab, d_model, heads, layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cpu").manual_seed(1)
    losses = []
    for _ in range(steps):
        tokens = torch.randint(0, vocab, (batch, seq + 1), generator=gen)
        x = tokens[:, :-1].contiguous().to(device)
        y = tokens[:, 1:].contiguous().to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(round(float(loss.item()), 4))
    return {"steps": steps, "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "shape": [batch, seq], "d_model": d_model, "layers": layers}


def inference_varlen(device, steps):
    import torch

    torch.manual_seed(0)
    rng = random.Random(2)
    vocab, d_model, heads, layers = 8192, 1024, 16, 4
    model = _encoder_lm(vocab, d_model, heads, layers).to(device=device, dtype=torch.bfloat16).eval()
    gen = torch.Generator(device="cpu").manual_seed(3)
    kept = []      # the last outputs stay alive a little, like responses waiting to be sent
    tokens_done = 0
    seqs = []
    with torch.no_grad():
        for _ in range(steps):
            seq = rng.randint(37, 2000)
            batch = rng.choice([1, 2, 3, 4, 6, 8])
            x = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
            logits = model(x)
            kept.append(logits[:, -max(1, seq // 8):].float())  # a new, odd-sized tensor
            if len(kept) > 3:
                kept.pop(0)
            next_tokens = logits[:, -1].argmax(-1).cpu()  # what a server would send back
            tokens_done += batch * seq
            del logits, x, next_tokens
            seqs.append((batch, seq))
    del kept
    return {"steps": steps, "tokens": tokens_done, "min_seq": min(s for _, s in seqs) if seqs else None,
            "max_seq": max(s for _, s in seqs) if seqs else None}


def growing_cache(device, steps):
    import torch

    torch.manual_seed(0)
    rng = random.Random(4)
    layers, batch, heads, dim = 4, 8, 16, 128  # 32 KiB per token per tensor
    window, keep = 4096, 1024  # past `window` tokens the cache drops all but the newest `keep`
    dtype = torch.bfloat16
    k_cache = [None] * layers
    v_cache = [None] * layers
    longest = 0
    truncations = 0
    checksum = 0.0
    for step in range(steps):
        new = rng.randint(1, 48)
        for layer in range(layers):
            k_new = torch.randn(batch, heads, new, dim, device=device, dtype=dtype)
            v_new = torch.randn(batch, heads, new, dim, device=device, dtype=dtype)
            if k_cache[layer] is None:
                k_cache[layer], v_cache[layer] = k_new, v_new
            else:
                # torch.cat makes a new, larger tensor each step; the old one dies right after.
                k_cache[layer] = torch.cat([k_cache[layer], k_new], dim=2)
                v_cache[layer] = torch.cat([v_cache[layer], v_new], dim=2)
            q = torch.randn(batch, heads, new, dim, device=device, dtype=dtype)
            scores = torch.matmul(q, k_cache[layer].transpose(-1, -2)) * (dim ** -0.5)
            out = torch.matmul(torch.softmax(scores.float(), dim=-1).to(dtype), v_cache[layer])
            del k_new, v_new, q, scores
            if layer == 0 and step % 50 == 0:
                checksum += float(out.float().mean().item())
            del out
        length = k_cache[0].shape[2]
        longest = max(longest, length)
        if length > window:
            # Sliding-window truncation: keep the newest tokens (a copy, as a real cache would).
            for layer in range(layers):
                k_cache[layer] = k_cache[layer][:, :, -keep:].contiguous()
                v_cache[layer] = v_cache[layer][:, :, -keep:].contiguous()
            truncations += 1
    final = k_cache[0].shape[2] if k_cache[0] is not None else 0
    del k_cache, v_cache
    return {"steps": steps, "longest_tokens": longest, "final_tokens": final, "truncations": truncations,
            "largest_tensor_bytes": longest * batch * heads * dim * 2, "checksum": round(checksum, 4)}


def _resnet50():
    try:
        import torchvision
        return torchvision.models.resnet50(weights=None)
    except ImportError:
        pass
    import torch.nn as nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, mid, stride):
            super().__init__()
            cout = mid * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + (x if self.down is None else self.down(x)))

    layers, cin = [], 64
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, mid, stride if b == 0 else 1))
            cin = mid * 4
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


def resnet(device, steps):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False  # the same algorithms (and workspaces) in every run
    model = _resnet50().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator(device="cpu").manual_seed(5)
    batch = 16
    losses = []
    for _ in range(steps):
        x = torch.randn(batch, 3, 224, 224, generator=gen).to(device)
        y = torch.randint(0, 1000, (batch,), generator=gen).to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(round(float(loss.item()), 4))
    return {"steps": steps, "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "batch": batch}


WORKLOADS = {
    "training": training,
    "inference_varlen": inference_varlen,
    "growing_cache": growing_cache,
    "resnet": resnet,
}
