# SPDX-License-Identifier: MIT
# Run twice by embed_twice.c, in one process, with the interpreter finalised and started again in
# between (ROUND = 0, then 1): generated functions, each freed before the next is made (code
# objects at freed ones' addresses, as prog_stale.py's `reused`), then one function allocating
# from the same line 20 times (a repeated stack). Sizes differ per round and per function, so a
# stack kept from the interpreter's first life shows as a wrong sum. Prints a JSON line.
import ctypes
import gc
import json

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
made = []
for i in range(40):
    # (Names unlike in their first 7 characters: 3.11 knows a code object by a key that holds
    # only those of its name; see design.md.)
    name = "g%03d_r%d" % (i, ROUND)  # noqa: F821 (set by embed_twice.c)
    src = "def %s(lib, byref, p, n):\n%s    return lib.cudaMalloc(byref(p), n)\n" % (name, "\n" * (i % 3))
    ns = {}
    exec(compile(src, "<generated %s>" % name, "exec"), ns)
    f = ns[name]
    p = ctypes.c_void_p()
    n = (500 + 100 * ROUND + i) * 1024  # noqa: F821
    f(cudart, ctypes.byref, p, n)
    cudart.cudaFree(p)
    made.append({"name": name, "line": 2 + i % 3, "bytes": n, "code": id(f.__code__)})
    del f, ns
    gc.collect()


def steady(n):
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), n)  # @site:steady
    cudart.cudaFree(p)


for _ in range(20):
    steady((700 + ROUND) * 1024)  # noqa: F821
print(json.dumps({"round": ROUND, "generated": made,  # noqa: F821
                  "reused_code_addresses": len(made) - len(set(m["code"] for m in made))}))
