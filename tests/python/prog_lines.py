# SPDX-License-Identifier: MIT
# Allocates device memory through ctypes on the simulated CUDA runtime from known lines (each
# marked "@site:NAME"), under every kind of Python frame the profiler must name: nested functions,
# a method, a comprehension, a threading.Thread, a call that releases the GIL (ctypes.CDLL) and
# one that holds it (ctypes.PyDLL), a Python callback under libc, and (--fork) a forked child.
# run_python_lines.py checks the reports by value.
import ctypes
import os
import sys
import threading

MIB = 1 << 20
cudart = ctypes.CDLL("libcudart.so.13")          # foreign calls release the GIL
cudart_gil = ctypes.PyDLL("libcudart.so.13")     # foreign calls keep the GIL
for lib in (cudart, cudart_gil):
    lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    lib.cudaMalloc.restype = ctypes.c_int
    lib.cudaFree.argtypes = [ctypes.c_void_p]
    lib.cudaFree.restype = ctypes.c_int
kept = []


def malloc(lib, n):
    p = ctypes.c_void_p()
    rc = lib.cudaMalloc(ctypes.byref(p), n)  # @site:malloc
    if rc != 0:
        sys.exit("cudaMalloc(%d) failed: %d" % (n, rc))
    kept.append(p.value)
    return p.value


def inner():
    return malloc(cudart, 3 * MIB)  # @site:inner


def outer():
    return inner()  # @site:outer


class Model:
    def forward(self):
        return malloc(cudart, 5 * MIB)  # @site:method


def comprehension():
    return [malloc(cudart, 1 * MIB) for _ in range(2)]  # @site:comprehension


def worker():
    malloc(cudart, 6 * MIB)  # @site:thread


def with_gil():
    malloc(cudart_gil, 7 * MIB)  # @site:pydll


def from_native_callback():
    # Python -> libc qsort (native) -> Python comparator -> allocation: the native frames must sit
    # between the two Python frames (the merge puts each eval-loop call's frames in its place).
    libc = ctypes.CDLL(None)
    cmp_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
    done = []

    def compare(a, b):
        if not done:
            done.append(malloc(cudart, 4 * MIB))  # @site:callback
        return a[0] - b[0]

    arr = (ctypes.c_int * 2)(2, 1)
    libc.qsort(arr, 2, ctypes.sizeof(ctypes.c_int), cmp_type(compare))  # @site:qsort


def forked():
    pid = os.fork()
    if pid == 0:
        malloc(cudart, 2 * MIB)  # @site:fork_child
        sys.exit(0)  # a normal exit: the child's report is written
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit("forked child failed: %d" % status)


def main():
    outer()  # @site:main_outer
    Model().forward()  # @site:main_method
    comprehension()  # @site:main_comprehension
    t = threading.Thread(target=worker)
    t.start()  # @site:main_thread
    t.join()
    with_gil()  # @site:main_pydll
    from_native_callback()  # @site:main_callback
    if "--fork" in sys.argv:
        forked()  # @site:main_fork
    print("allocated=%d" % len(kept))


if __name__ == "__main__":
    main()  # @site:module
