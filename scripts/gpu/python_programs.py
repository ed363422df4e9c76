# SPDX-License-Identifier: MIT
"""GPU check (issue 8) programs: CuPy and JAX allocating from marked lines, and a PyTorch run whose
gpumemprof.snapshot() is drawn by torch.cuda._memory_viz. Usage: python_programs.py cupy|jax|viz.
Each prints one JSON line; python_check.py reads the profiler's report beside it."""
import json
import os
import sys


def cupy_lines():
    import cupy
    cupy.cuda.set_allocator(None)  # no CuPy pool: each array is a cudaMalloc the profiler serves
    kept = []
    for i in range(4):
        kept.append(cupy.ones((8 << 20) + i, dtype=cupy.float32))  # @line:cupy_alloc
    cupy.cuda.Device().synchronize()
    return {"framework": "cupy"}


def jax_lines():
    import jax.numpy as jnp
    kept = []
    for i in range(4):
        kept.append(jnp.ones((8 << 20) + i, dtype=jnp.float32).block_until_ready())  # @line:jax_alloc
    return {"framework": "jax"}


def viz():
    import torch
    import torch.nn as nn
    sys.path.insert(0, os.environ["GPUMEMPROF_PYTHON_PACKAGE"])
    import gpumemprof
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(3):
        x = torch.randn(64, 1024, device="cuda")
        loss = model(x).square().mean()  # @line:viz_forward
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    snap = gpumemprof.snapshot()
    from torch.cuda import _memory_viz as mv
    seg_html = mv.segment_plot(snap)
    trace_html = mv.trace_plot(snap)
    frames = [f for s in snap["segments"] for b in s["blocks"] for f in b.get("frames", [])]
    here = os.path.basename(__file__)
    return {"segments": len(snap["segments"]), "segment_plot_bytes": len(seg_html), "trace_plot_bytes": len(trace_html),
            "trace_entries": sum(len(t) for t in snap["device_traces"]),
            "python_frames_in_blocks": sum(1 for f in frames if f.get("filename", "").endswith(here)),
            "allocated": gpumemprof.memory_allocated(), "torch_allocated": torch.cuda.memory_allocated()}


if __name__ == "__main__":
    print(json.dumps({"cupy": cupy_lines, "jax": jax_lines, "viz": viz}[sys.argv[1]]()))
