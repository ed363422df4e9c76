#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# H200 check of stack capture's cost on framework programs: a GPT-2 training loop and a GPT-2
# `generate` loop written with Hugging Face transformers (models built from configs, random
# weights: no network). Each workload runs in 4 modes, one fresh process each, alternating in
# `--rounds` rounds:
#   off:    LD_PRELOAD=<lib>, GPUMEMPROF_STACK_DEPTH=0 (the preload with stacks off: the baseline)
#   ours:   LD_PRELOAD=<lib>, defaults (native stacks + Python frames)
#   plain:  no preload (PyTorch's own baseline)
#   torch:  no preload, torch.cuda.memory._record_memory_history(stacks="all")
# and prints one JSON object: per workload the median step time of each mode, the ratios
# ours/off and torch/plain (median over rounds of the per-round ratio), and the goals
# (ours/off <= 1.02, and ours/off below torch/plain), plus what our report says capture cost.
#
#   python3 scripts/gpu/stacks_check.py --lib build/src/libgpumemprof.so [--rounds 5]
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("off", "ours", "plain", "torch")
# Also available with --modes: "pool" (LD_PRELOAD=<lib>, GPUMEMPROF_TORCH=pool: gpumemprof's pool
# serves every tensor, PyTorch's caching off: issue 18's step-time baseline) and "nopy"
# (LD_PRELOAD=<lib>, GPUMEMPROF_PYTHON=0: native frames only).


# ---- the workloads (run in a child process) ------------------------------------------------------

def gpt2_config(layers):
    from transformers import GPT2Config
    return GPT2Config(n_layer=layers, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def train(args):
    """HF-style training: GPT2LMHeadModel, AdamW, a fixed batch of random tokens, labels = inputs."""
    import torch
    from transformers import GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(gpt2_config(args.layers)).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (args.batch, args.seq), device="cuda")
    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    return times


def generate(args):
    """HF `generate`: greedy decoding of `new_tokens` tokens for a batch of random prompts."""
    import torch
    from transformers import GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(gpt2_config(args.layers)).cuda().eval()
    ids = torch.randint(0, 50257, (args.batch, 32), device="cuda")
    mask = torch.ones_like(ids)
    times = []
    with torch.no_grad():
        for step in range(args.warmup + args.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.new_tokens, do_sample=False,
                           min_new_tokens=args.new_tokens, pad_token_id=0)
            torch.cuda.synchronize()
            if step >= args.warmup:
                times.append(time.perf_counter() - t0)
    return times


def child(args):
    import torch
    if args.torch_history:
        torch.cuda.memory._record_memory_history(max_entries=200000, stacks="all")
    times = (train if args.child == "train" else generate)(args)
    print(json.dumps({"median_s": statistics.median(times), "times": times}))


# ---- the parent: alternating runs --------------------------------------------------------------

def run_one(args, workload, mode, out_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_")}
    env.pop("LD_PRELOAD", None)
    if mode in ("off", "ours", "pool", "nopy"):
        env["LD_PRELOAD"] = os.path.abspath(args.lib)
        env["GPUMEMPROF_OUTPUT"] = os.path.join(out_dir, "%s-%s-%%p" % (workload, mode))
        env["GPUMEMPROF_HTML"] = "0"  # the reports' writing is not part of a step
        env["GPUMEMPROF_PICKLE"] = "0"
        if mode == "off":
            env["GPUMEMPROF_STACK_DEPTH"] = "0"
        if mode == "pool":
            env["GPUMEMPROF_TORCH"] = "pool"
        if mode == "nopy":
            env["GPUMEMPROF_PYTHON"] = "0"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", workload, "--layers", str(args.layers),
           "--batch", str(args.batch if workload == "train" else args.gen_batch), "--seq", str(args.seq),
           "--steps", str(args.steps if workload == "train" else args.gen_steps),
           "--warmup", str(args.warmup), "--new-tokens", str(args.new_tokens)]
    if mode == "torch":
        cmd.append("--torch-history")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if p.returncode != 0:
        return {"error": "exit %d: %s" % (p.returncode, p.stderr[-3000:])}
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": "no result: " + p.stdout[-2000:]}


def capture_figures(out_dir, workload):
    """What our own report says capture cost (the JSON's "stacks" section) in the `ours` runs."""
    found = []
    for path in sorted(glob.glob(os.path.join(out_dir, "%s-ours-*.json" % workload))):
        try:
            found.append(json.load(open(path)).get("stacks"))
        except (OSError, ValueError):
            pass
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", help="libgpumemprof.so")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workloads", default="train,generate")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--gen-batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--gen-steps", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--keep", help="keep our reports in this directory")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated; off,ours,plain,torch always run")
    ap.add_argument("--child", choices=("train", "generate"), help=argparse.SUPPRESS)
    ap.add_argument("--torch-history", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    if not args.lib or not os.path.exists(args.lib):
        ap.error("--lib: libgpumemprof.so not found")
    out_dir = args.keep or tempfile.mkdtemp(prefix="stacks-check-")
    os.makedirs(out_dir, exist_ok=True)
    modes = tuple(dict.fromkeys(list(MODES) + [m for m in args.modes.split(",") if m]))
    result = {"lib": os.path.abspath(args.lib), "rounds": args.rounds, "modes": modes, "workloads": {}}
    for workload in args.workloads.split(","):
        per_round = []
        for r in range(args.rounds):
            row = {}
            # Alternate the order too, so that no mode always runs first (warm caches, clocks).
            order = modes if r % 2 == 0 else tuple(reversed(modes))
            for mode in order:
                row[mode] = run_one(args, workload, mode, out_dir)
            per_round.append(row)
            print("%s round %d: %s" % (workload, r + 1, {m: row[m].get("median_s", row[m].get("error"))
                                                         for m in modes}), file=sys.stderr)
        ok_rounds = [row for row in per_round if all("median_s" in row[m] for m in modes)]
        w = {"errors": [row[m]["error"] for row in per_round for m in modes if "error" in row[m]]}
        if ok_rounds:
            med = statistics.median
            w["median_step_s"] = {m: med(row[m]["median_s"] for row in ok_rounds) for m in modes}
            w["ours_over_off"] = med(row["ours"]["median_s"] / row["off"]["median_s"] for row in ok_rounds)
            w["torch_over_plain"] = med(row["torch"]["median_s"] / row["plain"]["median_s"] for row in ok_rounds)
            w["off_over_plain"] = med(row["off"]["median_s"] / row["plain"]["median_s"] for row in ok_rounds)
            w["ours_over_plain"] = med(row["ours"]["median_s"] / row["plain"]["median_s"] for row in ok_rounds)
            if "pool" in modes:
                w["ours_over_pool"] = med(row["ours"]["median_s"] / row["pool"]["median_s"] for row in ok_rounds)
                w["pool_over_plain"] = med(row["pool"]["median_s"] / row["plain"]["median_s"] for row in ok_rounds)
            if "nopy" in modes:
                w["nopy_over_off"] = med(row["nopy"]["median_s"] / row["off"]["median_s"] for row in ok_rounds)
            w["per_round"] = [{m: row[m]["median_s"] for m in modes} for row in ok_rounds]
            w["goal_ours_le_1.02"] = w["ours_over_off"] <= 1.02
            w["goal_ours_below_torch"] = w["ours_over_off"] < w["torch_over_plain"]
        w["our_capture_stats"] = capture_figures(out_dir, workload)
        result["workloads"][workload] = w
    result["reports"] = out_dir
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
