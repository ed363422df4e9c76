# SPDX-License-Identifier: MIT
# The pattern where a stack cache could take a code object for the freed one whose address it
# took: functions made from source one after another, each gone (collected) before the next is
# made, each allocating once through ctypes on the simulated runtime. prog_stale.py runs it in
# the main interpreter and in a thread of a subinterpreter, prog_embed.py in two lives of one.
import ctypes
import gc


def generated_allocations(cudart, names, sizes):
    """One function per name, calling cudaMalloc from its line 2, 3 or 4 by turns (blank lines add
    no code, so the code objects have the same size), allocating sizes[i] bytes, then freed.
    Returns what each did: its name, the line of the call, the bytes and its code object's id."""
    made = []
    for i, (name, n) in enumerate(zip(names, sizes)):
        src = "def %s(lib, byref, p, n):\n%s    return lib.cudaMalloc(byref(p), n)\n" % (name, "\n" * (i % 3))
        ns = {}
        exec(compile(src, "<generated %s>" % name, "exec"), ns)
        f = ns[name]
        p = ctypes.c_void_p()
        f(cudart, ctypes.byref, p, n)
        if cudart.cudaFree(p) != 0:
            raise RuntimeError("cudaFree failed")
        made.append({"name": name, "line": 2 + i % 3, "bytes": n, "code": id(f.__code__)})
        del f, ns
        gc.collect()  # the function and its globals form a cycle: only the collector frees them
    return made
