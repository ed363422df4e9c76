# SPDX-License-Identifier: MIT
# Run twice by embed_twice.c, in one process, with the interpreter finalised and started again in
# between (ROUND = 0, then 1): generated functions, each freed before the next is made (code
# objects at freed ones' addresses, as prog_stale.py's `reused`), then one function allocating
# from the same line 20 times (a repeated stack). Sizes differ per round and per function, so a
# stack kept from the interpreter's first life shows as a wrong sum. Prints a JSON line.
import ctypes
import json

from reused_code import generated_allocations  # (run_embed_twice.py puts this folder on PYTHONPATH)

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
# (Names unlike in their first 7 characters: 3.11 knows a code object by a key that holds only
# those of its name; see design.md.)
made = generated_allocations(cudart, ["g%03d_r%d" % (i, ROUND) for i in range(40)],  # noqa: F821 (embed_twice.c)
                             [(500 + 100 * ROUND + i) * 1024 for i in range(40)])  # noqa: F821


def steady(n):
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), n)  # @site:steady
    cudart.cudaFree(p)


for _ in range(20):
    steady((700 + ROUND) * 1024)  # noqa: F821
print(json.dumps({"round": ROUND, "generated": made,  # noqa: F821
                  "reused_code_addresses": len(made) - len(set(m["code"] for m in made))}))
