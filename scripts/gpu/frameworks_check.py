# SPDX-License-Identifier: MIT
"""GPU check (4): JAX with its platform allocator and CuPy with its pool off allocate device
memory that the profiler must see; CuPy's stream-ordered pool (cudaMallocAsync), alone and with
PyTorch's allocator loaded and attached in the same process (each such call then looks for
PyTorch's allocator in the caller's stack). Usage: frameworks_check.py jax|cupy|cupy_async|cupy_async_torch"""
import json
import os
import sys
import time


def run_jax():
    os.environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")
    import jax
    import jax.numpy as jnp
    total = 0
    for i in range(20):
        x = jnp.ones((1024, 1024 + i), dtype=jnp.float32)
        y = (x @ x.T).block_until_ready()
        total += int(x.size * 4 + y.size * 4)
        del x, y
    return {"framework": "jax", "backend": jax.default_backend(), "bytes_requested_at_least": total}


def run_cupy():
    import cupy
    cupy.cuda.set_allocator(None)          # no CuPy pool: every array is a cudaMalloc
    cupy.cuda.set_pinned_memory_allocator(None)
    total = 0
    for i in range(20):
        a = cupy.ones((1 << 20) + i, dtype=cupy.float32)
        b = a * 2
        total += a.nbytes + b.nbytes
        del a, b
    cupy.cuda.Device().synchronize()
    return {"framework": "cupy", "bytes_requested_at_least": total}


def run_cupy_async(with_torch, rounds=20000, nbytes=64 << 10):
    torch_allocated = None
    if with_torch:
        import torch
        keep = torch.ones(1 << 20, device="cuda")  # PyTorch's allocator in use (and attached)
    import cupy
    pool = cupy.cuda.MemoryAsyncPool()
    cupy.cuda.set_allocator(pool.malloc)
    total = 0
    for _ in range(200):  # warm-up: the pool's first reservations, our first captures
        cupy.empty(nbytes // 4, dtype=cupy.float32)
    t0 = time.perf_counter()
    for _ in range(rounds):
        a = cupy.empty(nbytes // 4, dtype=cupy.float32)
        total += a.nbytes
        del a
    seconds = time.perf_counter() - t0
    a = cupy.arange(1 << 16, dtype=cupy.float32)
    check = float(a.sum())
    cupy.cuda.Device().synchronize()
    if with_torch:
        torch.cuda.synchronize()
        torch_allocated = torch.cuda.memory_allocated()
        check += float(keep.sum().item())
    return {"framework": "cupy_async" + ("_torch" if with_torch else ""), "bytes_requested_at_least": total,
            "allocations": rounds, "seconds": seconds, "check": check, "torch_allocated": torch_allocated}


if __name__ == "__main__":
    which = sys.argv[1]
    runs = {"jax": run_jax, "cupy": run_cupy, "cupy_async": lambda: run_cupy_async(False),
            "cupy_async_torch": lambda: run_cupy_async(True)}
    print(json.dumps(runs[which]()))
