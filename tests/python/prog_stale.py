# SPDX-License-Identifier: MIT
# Allocates through ctypes on the simulated CUDA runtime in the patterns where a cache of stacks
# could give a stale answer (run_stale_caches.py checks the report by value). Every allocation
# is freed at once, so each site's total_count and total_bytes say how many of its allocations,
# of which size, were put under it:
#   lines:   two lines of one function, alternating (the same code object at the same depth);
#   callers: one function called from two callers, alternating;
#   reused:  generated functions, each freed before the next is made (code objects at a freed
#            one's address, with other names and lines);
#   threads: one thread after another, alternating two functions (new threads often get the
#            previous one's stack memory);
#   resumed: one generator allocating, resumed by turns from two callers at different depths
#            (its frame stays where it is; the frames below it change);
#   depth:   one recursive function allocating at its innermost call, 3 and 5 calls deep by
#            turns (the same frames, the same code, a chain of another length);
#   functions: function objects, each made where the previous one was freed, of code objects
#            that all stay alive (other names and lines), each called often enough that 3.11
#            gives it a version (3.11 knows a frame's code by its function and that version).
#   glue:    one Python function called back from C by libc's qsort and bsearch by turns, both
#            called from the same line: the same Python frames, other native frames between them.
#   subinterpreter: the `reused` pattern in a thread of a subinterpreter, whose code objects the
#            profiler's code watcher (3.12+, on the main interpreter) does not see destroyed.
# With --fill-watchers (3.12+, where _testcapi is installed), the program first takes all 8 code
# watcher slots itself: the profiler's own watcher cannot be added, and the program must not see
# the error that raises (its slots, its ids and the patterns' stacks are as without the profiler).
# With --restore-dealloc (3.11), once the profiler has wrapped PyCode_Type's deallocator to count
# destroyed code objects, the program puts the type's own deallocator back, as other code that
# takes the slot without calling what it found would: from then on nothing counts, and the
# profiler must see that the slot is not its wrapper's any more.
# Prints a JSON line with what it did, for the checker.
import ctypes
import json
import os
import sys
import threading
import types

from reused_code import generated_allocations

KIB = 1024
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaMalloc.restype = ctypes.c_int
cudart.cudaFree.argtypes = [ctypes.c_void_p]
cudart.cudaFree.restype = ctypes.c_int
libc = ctypes.CDLL(None)
libc.pthread_self.restype = ctypes.c_void_p
ROUNDS = 40


def free(p):
    if cudart.cudaFree(p) != 0:
        sys.exit("cudaFree failed")


def two_lines():
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), 101 * KIB)  # @site:line_a
    free(p)
    cudart.cudaMalloc(ctypes.byref(p), 102 * KIB)  # @site:line_b
    free(p)


def leaf(n):
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), n)  # @site:leaf
    free(p)


def caller_1():
    leaf(111 * KIB)  # @site:caller_1


def caller_2():
    leaf(112 * KIB)  # @site:caller_2


def reused(rounds):
    """Generated functions, the next one made after the previous one is gone (reused_code.py)."""
    return generated_allocations(cudart, ["gen_%03d" % i for i in range(rounds)],
                                 [(200 + i) * KIB for i in range(rounds)])


FUNC_CALLS = 10  # calls of each function: past the 8 after which 3.11 specialises a call to it


def functions(rounds):
    """Function objects at freed ones' addresses, each of a code object of its own (made first, all
    alive throughout) and called FUNC_CALLS times by a driver of its own (a call site that has not
    given up specialising). The driver is freed first, so that the next function takes the
    address of the one before."""
    made = []
    for i in range(rounds):
        name = "fn_%03d" % i
        src = ("def %s(lib, byref, p, n):\n%s    return lib.cudaMalloc(byref(p), n)\n"
               "def drive(f, lib, byref, p, n, free):\n"
               "    for _ in range(%d):\n"
               "        f(lib, byref, p, n)\n"
               "        free(p)\n" % (name, "\n" * (i % 3), FUNC_CALLS))
        codes = [c for c in compile(src, "<function %s>" % name, "exec").co_consts if isinstance(c, types.CodeType)]
        made.append({"name": name, "line": 2 + i % 3, "bytes": (300 + i) * KIB, "codes": codes})
    g = {"__builtins__": __builtins__}
    p = ctypes.c_void_p()
    for m in made:
        f = types.FunctionType(m["codes"][0], g)
        d = types.FunctionType(m["codes"][1], g)
        m["function"] = id(f)
        d(f, cudart, ctypes.byref, p, m["bytes"], free)
        del d
        del f
    for m in made:
        del m["codes"]
    return made


SUB_SRC = '''
import ctypes, json, sys, threading
sys.path.insert(0, %(here)r)
from reused_code import generated_allocations
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]
made = []
t = threading.Thread(target=lambda: made.extend(generated_allocations(
    cudart, ["sub_%%03d" %% i for i in range(%(rounds)d)], [(400 + i) * 1024 for i in range(%(rounds)d)])))
t.start()
t.join()
with open(%(path)r, "w") as out:
    json.dump(made, out)
'''


def subinterpreter(rounds, path):
    """The `reused` pattern in a thread of a legacy subinterpreter (it may load ctypes)."""
    if sys.version_info < (3, 12):
        return None  # no threads in 3.11's subinterpreters (and no code watcher to test)
    try:
        import _interpreters as si  # 3.13
        interp = si.create("legacy")
    except ImportError:
        import _xxsubinterpreters as si
        interp = si.create(isolated=False) if sys.version_info >= (3, 12) else si.create()
    here = os.path.dirname(os.path.abspath(__file__))
    si.run_string(interp, SUB_SRC % {"rounds": rounds, "path": path, "here": here})
    si.destroy(interp)
    with open(path) as f:
        return json.load(f)


def thread_a():
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), 121 * KIB)  # @site:thread_a
    free(p)
    selves.append(libc.pthread_self())


def thread_b():
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), 122 * KIB)  # @site:thread_b
    free(p)
    selves.append(libc.pthread_self())


selves = []


def generator_alloc():
    n = yield
    while True:
        p = ctypes.c_void_p()
        cudart.cudaMalloc(ctypes.byref(p), n)  # @site:gen_alloc
        free(p)
        n = yield


def drive_1(g):
    g.send(131 * KIB)  # @site:drive_1


def drive_2(g):
    drive_2_inner(g)


def drive_2_inner(g):
    g.send(132 * KIB)  # @site:drive_2


CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
libc.qsort.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, CMP]
libc.qsort.restype = None
libc.bsearch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, CMP]
libc.bsearch.restype = ctypes.c_void_p
glue_size = [0]
glue_calls = [0]


def glue_leaf(a, b):
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), glue_size[0])  # @site:glue_leaf
    free(p)
    glue_calls[0] += 1
    return 0


glue_cmp = CMP(glue_leaf)


def through(fn, args):
    return fn(*args)  # @site:through


def glue(rounds):
    """Returns how many allocations each of qsort and bsearch made (151 / 152 KiB each)."""
    arr = (ctypes.c_int * 2)(1, 2)
    key = ctypes.c_int(1)
    made = {"qsort": 0, "bsearch": 0}
    for _ in range(rounds):
        for name, size, args in (("qsort", 151, (arr, 2, 4, glue_cmp)), ("bsearch", 152, (ctypes.byref(key), arr, 2, 4, glue_cmp))):
            glue_size[0] = size * KIB
            before = glue_calls[0]
            through(getattr(libc, name), args)
            made[name] += glue_calls[0] - before
    return made


def recurse(k, n):
    if k > 1:
        return recurse(k - 1, n)  # @site:recurse_call
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), n)  # @site:recurse_leaf
    free(p)


def fill_watchers():
    """Takes every code watcher slot; returns the ids given (None without _testcapi's helper)."""
    try:
        import _testcapi
        add = _testcapi.add_code_watcher
    except (ImportError, AttributeError):
        return None
    ids = []
    while True:
        try:
            ids.append(add(len(ids) % 2))
        except RuntimeError:
            return ids


def restore_dealloc():
    """3.11: puts PyCode_Type's own deallocator back over the profiler's wrapper; returns whether
    the wrapper was there (None on other versions)."""
    if sys.version_info[:2] != (3, 11):
        return None
    slot = ctypes.c_void_p.from_address(id(types.CodeType) + 48)  # tp_dealloc (check_layouts.py)
    original = slot.value
    p = ctypes.c_void_p()
    cudart.cudaMalloc(ctypes.byref(p), 4 * KIB)  # the first capture asks the main thread for the count
    free(p)
    for _ in range(1000):
        pass  # the main thread runs the pending call between two bytecodes
    wrapped = slot.value != original
    slot.value = original
    return wrapped


def main():
    watchers = fill_watchers() if "--fill-watchers" in sys.argv else None
    restored = restore_dealloc() if "--restore-dealloc" in sys.argv else None
    for _ in range(ROUNDS):
        two_lines()
    for _ in range(ROUNDS):
        caller_1()
        caller_2()
    made = reused(ROUNDS)
    fns = functions(ROUNDS)
    g = generator_alloc()
    next(g)
    for _ in range(ROUNDS):
        drive_1(g)
        drive_2(g)
    glued = glue(ROUNDS)
    for _ in range(ROUNDS):
        recurse(3, 141 * KIB)
        recurse(5, 142 * KIB)
    for i in range(ROUNDS):
        t = threading.Thread(target=thread_a if i % 2 == 0 else thread_b)
        t.start()
        t.join()
    sub = subinterpreter(ROUNDS, sys.argv[1])
    if watchers is not None:
        import _testcapi
        try:
            _testcapi.add_code_watcher(0)
            watchers.append("a slot was free at the end")
        except RuntimeError:
            pass  # (all 8 still the program's)
    codes = [m["code"] for m in made]
    print(json.dumps({"rounds": ROUNDS, "generated": made, "watchers": watchers, "dealloc_wrapped": restored,
                      "functions": fns,
                      "function_calls": FUNC_CALLS, "subinterpreter": sub, "glued": glued,
                      "reused_sub_addresses": len(sub) - len(set(m["code"] for m in sub)) if sub else 0,
                      "reused_functions": sum(a["function"] == b["function"] for a, b in zip(fns, fns[1:])),
                      "reused_code_addresses": len(codes) - len(set(codes)),
                      "reused_thread_stacks": len(selves) - len(set(selves))}))


main()
