# SPDX-License-Identifier: MIT
"""HF transformers generate with a growing KV cache (GPT-2 from a config, greedy)."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from common import Probe


def main():
    torch.manual_seed(0)
    p = Probe("hf_generate")
    cfg = GPT2Config(n_layer=8, n_embd=1024, n_head=16, n_positions=1024, vocab_size=32000)
    model = GPT2LMHeadModel(cfg).cuda().eval().to(torch.bfloat16)
    prompt = torch.randint(0, 32000, (4, 64), device="cuda")
    outs = []
    with torch.no_grad():
        for rep in range(3):
            p.step_begin()
            out = model.generate(prompt, max_new_tokens=160, do_sample=False, pad_token_id=0)  # the generate line
            p.step_end()
            if rep == 1:
                p.sample("mid")
            outs.append(int(out.sum().item()))
    p.sample("end")
    p.finish(token_sums=outs)


if __name__ == "__main__":
    main()
