# SPDX-License-Identifier: MIT
"""A PyTorch program whose kernel hits a device-side assert (an index out of range), as a user's
bad label or token id does. It catches each error and goes on, printing one line per step: what
it did and what PyTorch answered (the first line of the error). gpu_check.py's `faults` runs it
alone and preloaded with PyTorch's allocator attached; the lines and the exit status must match."""
import sys
import time

import torch


def attempt(label, fn):
    try:
        r = fn()
        print(f"{label}: ok" + ("" if r is None else f" {r}"), flush=True)
    except Exception as e:  # noqa: BLE001 - the answer is what is printed
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"{label}: {type(e).__name__}: {first}", flush=True)


def main():
    notice = sys.argv[1] if len(sys.argv) > 1 else "sync"
    torch.manual_seed(0)
    table = torch.randn(1000, 64, device="cuda")
    kept = [torch.empty(1 << 20, device="cuda") for _ in range(4)]
    del kept[1:]  # three blocks back in PyTorch's cache
    attempt("before the fault, a sum", lambda: round(float(table.sum()), 3))
    ids = torch.tensor([3, 7, 5000], device="cuda")  # 5000 is out of range
    attempt("the bad lookup launched", lambda: tuple(table[ids].shape))
    if notice == "sync":
        attempt("torch.cuda.synchronize()", torch.cuda.synchronize)
    elif notice == "item":
        attempt("a value read back (.item())", lambda: float(table.sum().item()))
    else:
        time.sleep(0.2)  # no look: give the device the time to reach the fault
    attempt("a tensor from PyTorch's cache", lambda: tuple(torch.empty(1 << 20, device="cuda").shape))
    attempt("a new 1 GiB tensor", lambda: tuple(torch.empty(1 << 28, device="cuda").shape))
    attempt("a kernel on the cached tensor", lambda: round(float(kept[0].fill_(1).sum()), 3))
    attempt("torch.cuda.mem_get_info()", lambda: torch.cuda.mem_get_info()[1] > 0)
    del kept
    attempt("torch.cuda.empty_cache()", torch.cuda.empty_cache)
    attempt("torch.cuda.memory_allocated()", lambda: torch.cuda.memory_allocated() > 0)
    print("done", flush=True)


if __name__ == "__main__":
    main()
