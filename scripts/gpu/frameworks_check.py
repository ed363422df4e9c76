# SPDX-License-Identifier: MIT
"""GPU check (4): JAX with its platform allocator and CuPy with its pool off allocate device
memory that the profiler must see. Usage: frameworks_check.py jax|cupy"""
import json
import os
import sys


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


if __name__ == "__main__":
    which = sys.argv[1]
    print(json.dumps(run_jax() if which == "jax" else run_cupy()))
