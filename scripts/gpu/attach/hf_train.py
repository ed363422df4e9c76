# SPDX-License-Identifier: MIT
"""HF transformers GPT-2 training: AdamW, bf16 autocast (random weights from a config)."""
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from common import Probe


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    torch.manual_seed(0)
    p = Probe("hf_train")
    cfg = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512, vocab_size=32000)
    model = GPT2LMHeadModel(cfg).cuda()  # the model's parameters
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 32000, (8, 512), device="cuda")
    losses, peaks = [], []
    for step in range(steps):
        p.step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss  # the forward line
        if step == steps // 2:
            p.sample("mid")
        loss.backward()  # the backward line
        opt.step()
        opt.zero_grad(set_to_none=True)
        p.step_end()
        losses.append(round(float(loss), 4))
        peaks.append(int(torch.cuda.max_memory_allocated()))
    p.sample("end")
    p.finish(losses=losses, max_memory_allocated_per_step=peaks)


if __name__ == "__main__":
    main()
