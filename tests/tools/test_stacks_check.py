#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# scripts/gpu/stacks_check.py --concurrent, without a GPU: stand-ins for torch and transformers
# (a step is plain Python work; the pool mode's model takes 1.5 s longer to build) check what the
# side-by-side step time rests on: every mode of every round ran and was timed, the timed steps
# of a round started together although one process was ready 1.5 s later, each process ran on
# its own CPUs (halves swapped from one round to the next, where there are two CPUs or more),
# and each step's CPU side was read.
import json
import os
import subprocess
import sys
import tempfile

TORCH = '''
import contextlib
bfloat16 = "bf16"
def manual_seed(s): pass
class _Cuda:
    @staticmethod
    def synchronize(): pass
cuda = _Cuda()
def randint(a, b, shape, device=None): return [0]
@contextlib.contextmanager
def autocast(*a, **k): yield
class _Opt:
    def __init__(self, *a, **k): pass
    def step(self): sum(range(20000))
    def zero_grad(self, set_to_none=True): pass
class optim: AdamW = _Opt
'''

TRANSFORMERS = '''
import os, time
class GPT2Config:
    def __init__(self, **k): pass
class _Loss:
    def backward(self): sum(range(40000))
class _Out: loss = _Loss()
class GPT2LMHeadModel:
    def __init__(self, cfg):
        if os.environ.get("GPUMEMPROF_TORCH") == "pool":
            time.sleep(1.5)  # one process of the pair is ready late
    def cuda(self): return self
    def train(self): return self
    def parameters(self): return []
    def __call__(self, **k): sum(range(20000)); return _Out()
'''

FAILED = []


def check(name, ok, detail=""):
    print("%s %s %s" % ("ok  " if ok else "FAIL", name, detail))
    if not ok:
        FAILED.append(name)


def libc_path():
    """A library every process has loaded: a harmless LD_PRELOAD for the modes that set one."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "/libc.so" in path or "/libc-" in path:
                return path
    sys.exit("libc not found in /proc/self/maps")


def main():
    script = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="stacks-check-test-")
    with open(os.path.join(tmp, "torch.py"), "w") as f:
        f.write(TORCH)
    with open(os.path.join(tmp, "transformers.py"), "w") as f:
        f.write(TRANSFORMERS)
    env = dict(os.environ, PYTHONPATH=tmp)
    env.pop("LD_PRELOAD", None)
    p = subprocess.run([sys.executable, script, "--lib", libc_path(), "--workloads", "train", "--modes", "ours,pool",
                        "--rounds", "2", "--steps", "12", "--warmup", "2", "--concurrent", "--keep",
                        os.path.join(tmp, "out")], env=env, capture_output=True, text=True, timeout=240)
    check("exit status 0", p.returncode == 0, p.stderr[-1500:] if p.returncode else "")
    try:
        res = json.loads(p.stdout)
    except ValueError:
        check("one JSON object on stdout", False, p.stdout[-500:])
        return 1
    w = res["workloads"]["train"]
    check("no mode failed", not w["errors"], str(w["errors"])[:800])
    rows = w.get("per_round", [])
    check("both rounds timed both modes", len(rows) == 2 and all(set(r) == {"ours", "pool"} for r in rows), str(rows))
    # Each process's own record (the parent's JSON keeps only the medians): rounds run the same
    # way through run_together, whose results are the children's JSON.
    sys.path.insert(0, os.path.dirname(script))
    import stacks_check  # noqa: E402
    args = stacks_check.parse_args(["--lib", libc_path(), "--workloads", "train", "--steps", "12", "--warmup", "2",
                                    "--concurrent"])
    os.environ["PYTHONPATH"] = tmp
    cpus = sorted(os.sched_getaffinity(0))
    for r in (0, 1):
        row = stacks_check.run_together(args, "train", ("ours", "pool"), tempfile.mkdtemp(dir=tmp), r)
        ours, pool = row["ours"], row["pool"]
        if "error" in ours or "error" in pool:
            check("round %d ran" % r, False, str(row)[:800])
            continue
        gap = abs(ours["timed_from"] - pool["timed_from"])
        check("round %d: timed steps started together (pool ready 1.5 s late)" % r, gap < 0.5, "%.3f s apart" % gap)
        if len(cpus) >= 2:
            check("round %d: each process on its own CPUs" % r, not set(ours["cpus"]) & set(pool["cpus"]),
                  "%s / %s" % (ours["cpus"], pool["cpus"]))
            half = len(cpus) // 2
            want = cpus[:half] if r == 0 else cpus[half:2 * half]
            check("round %d: the halves rotate" % r, ours["cpus"] == want, "%s, wanted %s" % (ours["cpus"], want))
        c = ours.get("counters_median", {})
        check("round %d: each step's CPU side read" % r,
              c.get("main_thread_cpu_s", 0) > 0 and c.get("process_cpu_s", 0) >= c.get("main_thread_cpu_s", 0) * 0.9,
              str(c))
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
