# SPDX-License-Identifier: MIT
"""torch.multiprocessing: a CUDA tensor shared with a spawned child through a queue."""
import torch
import torch.multiprocessing as mp

from common import Probe


def child(q_in, q_out):
    t = q_in.get()
    q_out.put(float(t.sum().item()))
    del t


def main():
    p = Probe("mp_share")
    ctx = mp.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=child, args=(q_in, q_out))
    proc.start()
    t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    q_in.put(t)
    got = q_out.get(timeout=120)
    proc.join(timeout=120)
    p.sample("end")
    p.finish(child_sum=got, exitcode=proc.exitcode)


if __name__ == "__main__":
    main()
