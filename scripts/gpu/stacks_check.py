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
# With --inprocess each round is two processes, and each alternates within itself in blocks of
# steps (on, off, off, on, ...), which removes the spread between processes from the ratios:
#   ours:   the preload, stacks switched by gpumemprof_set_stack_depth (default depth / 0);
#   torch:  no preload, _record_memory_history(stacks="all") switched on and off;
#   torchpy (with --torch-python): the same with stacks="python", PyTorch's cheapest stacks.
#
#   python3 scripts/gpu/stacks_check.py --lib build/src/libgpumemprof.so [--rounds 5] [--inprocess]
#   issue 18's step time (host-bound bf16 training, attach vs our pool vs plain):
#   python3 scripts/gpu/stacks_check.py --lib ... --workloads train --layers 6 --seq 512 --vocab 32000 \
#       --bf16 --modes ours,pool,plain
#   the same side by side (--concurrent: the modes of a round at once, each on its own share of the
#   CPUs, timed steps started together) and against an earlier build (--base-lib, mode "base"):
#   ... --modes ours,base,pool --steps 100 --concurrent --base-lib OLD/libgpumemprof.so
# Each timed step of training also reads its CPU side (StepCounters), reported per mode and as
# ours / pool round by round.
import argparse
import ctypes
import glob
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

MODES = ("off", "ours", "plain", "torch")
# Also available with --modes: "pool" (LD_PRELOAD=<lib>, GPUMEMPROF_TORCH=pool: gpumemprof's pool
# serves every tensor, PyTorch's caching off: issue 18's step-time baseline), "nopy"
# (LD_PRELOAD=<lib>, GPUMEMPROF_PYTHON=0: native frames only) and "inline" (LD_PRELOAD=<lib>,
# GPUMEMPROF_TORCH_THREAD=0: PyTorch's events handled wholly on the thread that made them) and
# "base" (LD_PRELOAD=<--base-lib>, defaults: an earlier build of the library, for an A/B).


# ---- the workloads (run in a child process) ------------------------------------------------------

def barrier(args):
    """--concurrent: the processes of one round start their timed steps together (each marks its
    arrival with a file, then waits, at most 120 s, for the others' marks)."""
    if not args.barrier:
        return
    folder, count = args.barrier.rsplit(":", 1)
    open(os.path.join(folder, "ready-%d" % os.getpid()), "w").close()
    deadline = time.monotonic() + 120
    while len(glob.glob(os.path.join(folder, "ready-*"))) < int(count) and time.monotonic() < deadline:
        time.sleep(0.005)
    args.timed_from = time.time()  # (the processes' common start, for the check of the check)


class StepCounters:
    """What a step costs the CPU besides its wall time, which moves by up to 1.6x between
    processes on the H200's host: the instructions the main thread retires in user space (a
    hardware counter through perf_event_open, where the kernel allows it; None where not), the
    main thread's CPU time and the whole process's CPU time (every thread: PyTorch's, ours)."""

    def __init__(self):
        self.fd = self._open_instructions()
        self.rows = []

    @staticmethod
    def _open_instructions():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            # struct perf_event_attr (PERF_ATTR_SIZE_VER5, 112 bytes): type PERF_TYPE_HARDWARE,
            # config PERF_COUNT_HW_INSTRUCTIONS, flags exclude_kernel | exclude_hv; this thread, any CPU.
            attr = bytearray(112)
            struct.pack_into("<IIQ", attr, 0, 0, 112, 1)
            struct.pack_into("<Q", attr, 40, (1 << 5) | (1 << 6))
            buf = ctypes.create_string_buffer(bytes(attr), 112)
            libc.syscall.restype = ctypes.c_long
            fd = libc.syscall(298, buf, 0, -1, -1, 0)  # __NR_perf_event_open on x86-64
            return fd if fd >= 0 else None
        except (OSError, AttributeError):
            return None

    def read(self):
        instr = struct.unpack("<Q", os.read(self.fd, 8))[0] if self.fd is not None else None
        return instr, time.thread_time(), time.process_time()

    def record(self, before, after):
        self.rows.append(tuple(None if b is None else a - b for a, b in zip(after, before)))

    def medians(self):
        if not self.rows:
            return {}
        names = ("main_thread_instructions", "main_thread_cpu_s", "process_cpu_s")
        return {name: statistics.median(r[i] for r in self.rows) for i, name in enumerate(names)
                if self.rows[0][i] is not None}


def gpt2_config(args):
    from transformers import GPT2Config
    return GPT2Config(n_layer=args.layers, n_embd=768, n_head=12, n_positions=1024, vocab_size=args.vocab,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


class Blocks:
    """In-process alternation (--inprocess): the steps after the warm-up run in blocks of
    `block` steps, switching the thing measured on and off between blocks; the first step of
    each block is not timed (switching is not part of a step). `switch(on)` does the switching."""

    def __init__(self, args, switch):
        self.args, self.switch, self.on = args, switch, None
        self.times = {True: [], False: []}

    def before(self, step):
        a = self.args
        if step < a.warmup:
            return False
        k = (step - a.warmup) // a.block
        on = k % 2 == 0 if (k // 2) % 2 == 0 else k % 2 == 1  # on,off,off,on,on,off...: no mode always first
        if on != self.on:
            self.switch(on)
            self.on = on
        return (step - a.warmup) % a.block != 0

    def record(self, timed, seconds):
        if timed:
            self.times[self.on].append(seconds)


def switcher(args):
    """What --inprocess switches: our stacks (gpumemprof_set_stack_depth) under the preload,
    PyTorch's recorder (_record_memory_history) without it."""
    if not args.inprocess:
        return None
    if args.torch_history:
        import torch

        def torch_switch(on):
            torch.cuda.synchronize()
            torch.cuda.memory._record_memory_history(None if not on else "all", max_entries=200000,
                                                     stacks=args.torch_stacks)
        return Blocks(args, torch_switch)
    import ctypes
    lib = ctypes.CDLL(None)
    lib.gpumemprof_set_stack_depth.restype = ctypes.c_int
    lib.gpumemprof_set_stack_depth.argtypes = [ctypes.c_int]
    depth = lib.gpumemprof_set_stack_depth(-1)

    def ours_switch(on):
        lib.gpumemprof_set_stack_depth(depth if on else 0)
    return Blocks(args, ours_switch)


def train(args):
    """HF-style training: GPT2LMHeadModel, AdamW, a fixed batch of random tokens, labels = inputs."""
    import torch
    from transformers import GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(gpt2_config(args)).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    times, blocks, phases = [], switcher(args), []
    args.phase_times = phases
    counters = args.counters = StepCounters()
    for step in range(args.warmup + args.steps):
        timed = blocks.before(step) if blocks else step >= args.warmup
        if step == args.warmup:
            barrier(args)
        torch.cuda.synchronize()
        c0 = counters.read()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):
            out = model(input_ids=ids, labels=ids)
        if args.phases:
            torch.cuda.synchronize()
            t1 = time.perf_counter()
        out.loss.backward()
        if args.phases:
            torch.cuda.synchronize()
            t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if args.phases and step >= args.warmup:
            phases.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
        if blocks:
            blocks.record(timed, time.perf_counter() - t0)
        elif timed:
            times.append(time.perf_counter() - t0)
            counters.record(c0, counters.read())
    return blocks.times if blocks else times


def generate(args):
    """HF `generate`: greedy decoding of `new_tokens` tokens for a batch of random prompts."""
    import torch
    from transformers import GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(gpt2_config(args)).cuda().eval()
    ids = torch.randint(0, args.vocab, (args.batch, 32), device="cuda")
    mask = torch.ones_like(ids)
    times, blocks = [], switcher(args)
    with torch.no_grad():
        for step in range(args.warmup + args.steps):
            timed = blocks.before(step) if blocks else step >= args.warmup
            if step == args.warmup:
                barrier(args)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.new_tokens, do_sample=False,
                           min_new_tokens=args.new_tokens, pad_token_id=0)
            torch.cuda.synchronize()
            if blocks:
                blocks.record(timed, time.perf_counter() - t0)
            elif timed:
                times.append(time.perf_counter() - t0)
    return blocks.times if blocks else times


def child(args):
    import torch
    if args.torch_history and not args.inprocess:
        torch.cuda.memory._record_memory_history(max_entries=200000, stacks=args.torch_stacks)
    times = (train if args.child == "train" else generate)(args)
    if isinstance(times, dict):  # --inprocess: the blocks with the thing measured on, and off
        on, off = times[True], times[False]
        print(json.dumps({"median_on_s": statistics.median(on), "median_off_s": statistics.median(off),
                          "on_over_off": statistics.median(on) / statistics.median(off), "on": on, "off": off}))
        return
    out = {"median_s": statistics.median(times), "times": times, "timed_from": getattr(args, "timed_from", None),
           "cpus": sorted(os.sched_getaffinity(0))}
    if getattr(args, "counters", None):
        out["counters_median"] = args.counters.medians()
    if getattr(args, "phase_times", None):
        out["phases_median_s"] = {name: statistics.median(p[i] for p in args.phase_times)
                                  for i, name in enumerate(("forward", "backward", "optimizer"))}
    print(json.dumps(out))


# ---- the parent: alternating runs --------------------------------------------------------------

def command(args, workload, mode, out_dir):
    """The child's command line and environment for one mode."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_")}
    env.pop("LD_PRELOAD", None)
    if mode in ("off", "ours", "pool", "nopy", "inline", "base"):
        env["LD_PRELOAD"] = os.path.abspath(args.base_lib if mode == "base" else args.lib)
        env["GPUMEMPROF_OUTPUT"] = os.path.join(out_dir, "%s-%s-%%p" % (workload, mode))
        env["GPUMEMPROF_HTML"] = "0"  # the reports' writing is not part of a step
        env["GPUMEMPROF_PICKLE"] = "0"
        for setting in args.preload_env:  # (--preload-env: e.g. the sampling mode's cost)
            key, _, value = setting.partition("=")
            env[key] = value
        if mode == "off":
            env["GPUMEMPROF_STACK_DEPTH"] = "0"
        if mode == "pool":
            env["GPUMEMPROF_TORCH"] = "pool"
        if mode == "nopy":
            env["GPUMEMPROF_PYTHON"] = "0"
        if mode == "inline":
            env["GPUMEMPROF_TORCH_THREAD"] = "0"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", workload, "--layers", str(args.layers),
           "--batch", str(args.batch if workload == "train" else args.gen_batch), "--seq", str(args.seq),
           "--steps", str(args.steps if workload == "train" else args.gen_steps),
           "--warmup", str(args.warmup), "--new-tokens", str(args.new_tokens)]
    cmd += ["--vocab", str(args.vocab)] + (["--bf16"] if args.bf16 else [])
    if args.inprocess:
        cmd += ["--inprocess", "--block", str(args.block)]
    if mode in ("torch", "torchpy"):
        cmd += ["--torch-history", "--torch-stacks", "python" if mode == "torchpy" else "all"]
    return cmd, env


def result_of(returncode, stdout, stderr):
    if returncode != 0:
        return {"error": "exit %d: %s" % (returncode, stderr[-3000:])}
    lines = [l for l in stdout.splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": "no result: " + stdout[-2000:]}


def run_one(args, workload, mode, out_dir):
    cmd, env = command(args, workload, mode, out_dir)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    return result_of(p.returncode, p.stdout, p.stderr)


def run_together(args, workload, modes, out_dir, round_index):
    """--concurrent: one process per mode at the same time, each on its own share of this
    process's CPUs (the shares rotate from round to round), their timed steps started together:
    what the host does meanwhile (other tenants, clocks) falls on every mode alike."""
    cpus = sorted(os.sched_getaffinity(0))
    share = len(cpus) // len(modes)
    folder = tempfile.mkdtemp(prefix="barrier-", dir=out_dir)
    procs = {}
    for i, mode in enumerate(modes):
        cmd, env = command(args, workload, mode, out_dir)
        cmd += ["--barrier", "%s:%d" % (folder, len(modes))]
        k = (i + round_index) % len(modes)
        mine = set(cpus[k * share:(k + 1) * share]) or set(cpus)
        procs[mode] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       preexec_fn=lambda m=mine: os.sched_setaffinity(0, m))
    row = {}
    for mode, p in procs.items():
        try:
            out, err = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        row[mode] = result_of(p.returncode, out, err)
    return row


def capture_figures(out_dir, workload, mode="ours"):
    """What our own report says capture cost (the JSON's "stacks" section) in one mode's runs."""
    found = []
    for path in sorted(glob.glob(os.path.join(out_dir, "%s-%s-*.json" % (workload, mode)))):
        try:
            found.append(json.load(open(path)).get("stacks"))
        except (OSError, ValueError):
            pass
    return found


def inprocess_rounds(args, workload, modes, out_dir):
    """--inprocess: per round one process of each mode, each alternating on/off in blocks."""
    per_round, errors = [], []
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else tuple(reversed(modes))
        row = {mode: run_one(args, workload, mode, out_dir) for mode in order}
        errors += [row[m]["error"] for m in modes if "error" in row[m]]
        print("%s round %d: %s" % (workload, r + 1, {m: row[m].get("on_over_off", row[m].get("error"))
                                                     for m in modes}), file=sys.stderr)
        if all("on_over_off" in row[m] for m in modes):
            per_round.append(row)
    w = {"errors": errors, "rounds_ok": len(per_round)}
    if per_round:
        med = statistics.median
        w["ours_over_off"] = med(row["ours"]["on_over_off"] for row in per_round)
        w["per_round"] = [{"ours_over_off": row["ours"]["on_over_off"],
                           "ours_on_s": row["ours"]["median_on_s"], "ours_off_s": row["ours"]["median_off_s"]}
                          for row in per_round]
        if "torch" in modes:
            w["torch_over_plain"] = med(row["torch"]["on_over_off"] for row in per_round)
            for out, row in zip(w["per_round"], per_round):
                out.update(torch_over_plain=row["torch"]["on_over_off"], torch_on_s=row["torch"]["median_on_s"],
                           plain_s=row["torch"]["median_off_s"])
        if "torchpy" in modes:
            w["torchpy_over_plain"] = med(row["torchpy"]["on_over_off"] for row in per_round)
            for out, row in zip(w["per_round"], per_round):
                out["torchpy_over_plain"] = row["torchpy"]["on_over_off"]
        w["goal_ours_le_1.02"] = w["ours_over_off"] <= 1.02
        if "torch" in modes:
            w["goal_ours_below_torch"] = w["ours_over_off"] < w["torch_over_plain"]
    w["our_capture_stats"] = capture_figures(out_dir, workload)
    return w


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", help="libgpumemprof.so")
    ap.add_argument("--base-lib", help="an earlier libgpumemprof.so, run as the mode 'base'")
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
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast in training (issue 18's hf_train)")
    ap.add_argument("--keep", help="keep our reports in this directory")
    ap.add_argument("--preload-env", action="append", default=[], metavar="GPUMEMPROF_X=V",
                    help="a setting for every process with the preload (repeatable)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, the modes run")
    ap.add_argument("--inprocess", action="store_true",
                    help="two processes a round: the preload alternating stacks on/off in blocks of steps "
                         "(gpumemprof_set_stack_depth), and plain PyTorch alternating its recorder on/off")
    ap.add_argument("--ours-only", action="store_true",
                    help="--inprocess: run only our preload's process (no PyTorch recorder), e.g. to compare settings")
    ap.add_argument("--block", type=int, default=4, help="--inprocess: steps a block (the first is not timed)")
    ap.add_argument("--concurrent", action="store_true",
                    help="the modes of a round run at the same time, each on its own share of the CPUs (rotated "
                         "each round), their timed steps started together")
    ap.add_argument("--barrier", help=argparse.SUPPRESS)  # FOLDER:COUNT, set by --concurrent
    ap.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)  # train: time each phase too
    ap.add_argument("--child", choices=("train", "generate"), help=argparse.SUPPRESS)
    ap.add_argument("--torch-history", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--torch-stacks", default="all", help=argparse.SUPPRESS)  # the recorder's stacks=
    ap.add_argument("--torch-python", action="store_true",
                    help="--inprocess: also PyTorch's recorder with stacks='python' (mode torchpy)")
    return ap


def parse_args(argv=None):
    return parser().parse_args(argv)


def main():
    ap = parser()
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    if not args.lib or not os.path.exists(args.lib):
        ap.error("--lib: libgpumemprof.so not found")
    out_dir = args.keep or tempfile.mkdtemp(prefix="stacks-check-")
    os.makedirs(out_dir, exist_ok=True)
    if args.inprocess:
        modes = ("ours",) if args.ours_only else ("ours", "torch", "torchpy") if args.torch_python else ("ours", "torch")
    else:
        modes = tuple(dict.fromkeys(m for m in args.modes.split(",") if m))
    result = {"lib": os.path.abspath(args.lib), "rounds": args.rounds, "modes": modes, "workloads": {},
              "inprocess": args.inprocess, "concurrent": args.concurrent}
    for workload in args.workloads.split(","):
        if args.inprocess:
            result["workloads"][workload] = inprocess_rounds(args, workload, modes, out_dir)
            continue
        per_round = []
        for r in range(args.rounds):
            row = {}
            # Alternate the order too, so that no mode always runs first (warm caches, clocks).
            order = modes if r % 2 == 0 else tuple(reversed(modes))
            if args.concurrent:
                row = run_together(args, workload, modes, out_dir, r)
            else:
                for mode in order:
                    row[mode] = run_one(args, workload, mode, out_dir)
            per_round.append(row)
            print("%s round %d: %s" % (workload, r + 1, {m: row[m].get("median_s", row[m].get("error"))
                                                         for m in modes}), file=sys.stderr)
            print("%s round %d counters: %s" % (workload, r + 1, {m: row[m].get("counters_median") for m in modes}),
                  file=sys.stderr, flush=True)
        ok_rounds = [row for row in per_round if all("median_s" in row[m] for m in modes)]
        w = {"errors": [row[m]["error"] for row in per_round for m in modes if "error" in row[m]]}
        if ok_rounds:
            med = statistics.median
            w["median_step_s"] = {m: med(row[m]["median_s"] for row in ok_rounds) for m in modes}
            # Every ratio of two modes run, the median over rounds of each round's ratio.
            for a, b in (("ours", "off"), ("torch", "plain"), ("off", "plain"), ("ours", "plain"), ("ours", "pool"),
                         ("pool", "plain"), ("nopy", "off"), ("ours", "inline"), ("inline", "pool"), ("ours", "base"),
                         ("base", "pool"), ("off", "pool")):
                if a in modes and b in modes:
                    w["%s_over_%s" % (a, b)] = med(row[a]["median_s"] / row[b]["median_s"] for row in ok_rounds)
            w["per_round"] = [{m: row[m]["median_s"] for m in modes} for row in ok_rounds]
            # The CPU's side of a step (StepCounters), per mode, and ours / pool round by round.
            names = sorted(set.intersection(*[set(row[m].get("counters_median", {})) for row in ok_rounds
                                              for m in modes]))
            if names:
                w["counters_median"] = {m: {n: med(row[m]["counters_median"][n] for row in ok_rounds) for n in names}
                                        for m in modes}
                if "ours" in modes and "pool" in modes:
                    w["counters_ours_over_pool"] = {
                        n: [row["ours"]["counters_median"][n] / row["pool"]["counters_median"][n] for row in ok_rounds]
                        for n in names}
                    w["ours_faster_rounds"] = sum(row["ours"]["median_s"] < row["pool"]["median_s"]
                                                  for row in ok_rounds)
            if "ours_over_off" in w:
                w["goal_ours_le_1.02"] = w["ours_over_off"] <= 1.02
            if "ours_over_off" in w and "torch_over_plain" in w:
                w["goal_ours_below_torch"] = w["ours_over_off"] < w["torch_over_plain"]
            if "ours_over_pool" in w:
                w["goal_ours_le_pool"] = w["ours_over_pool"] <= 1.0
        w["our_capture_stats"] = capture_figures(out_dir, workload)
        if "base" in modes:
            w["base_capture_stats"] = capture_figures(out_dir, workload, "base")
        result["workloads"][workload] = w
    result["reports"] = out_dir
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
