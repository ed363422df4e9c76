# SPDX-License-Identifier: MIT
"""One process, two GPUs (multi_gpu_check.py): tensors on cuda:0 and cuda:1 (sizes that PyTorch's
allocator does not round), PyTorch's allocator attached. Prints what was allocated on each device;
the report must have one `devices` entry per device with exactly those figures."""
import json

import torch

MIB = 1 << 20
PLAN = {0: [3 * MIB, 5 * MIB], 1: [7 * MIB]}


def main():
    assert torch.cuda.device_count() >= 2, "needs two GPUs"
    held = []
    for dev, sizes in PLAN.items():
        torch.cuda.set_device(dev)
        for s in sizes:
            held.append(torch.empty(s, dtype=torch.uint8, device="cuda:%d" % dev))
    for t in held:
        t.fill_(1)  # no allocation of its own
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    del held
    print(json.dumps({"plan": {str(k): v for k, v in PLAN.items()}}), flush=True)


if __name__ == "__main__":
    main()
