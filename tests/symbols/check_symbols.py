#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Check the dynamic interface of libgpumemprof.so: every defined dynamic symbol matches the
# allow-list of src/intercept/exports.map (cu[A-Z]*, cuda[A-Z]*, dlsym, dlclose, the exec functions,
# gpumemprof_*), none is a C++
# name, the expected doors are there, and no DT_NEEDED entry names libcuda or libcudart (the
# library is loaded into every process, most of which have no CUDA at all). The exported driver
# names are exactly the HOOK entries of src/core/driver_functions.hpp: a hook missing from the list
# would be missing from the dlsym and cuGetProcAddress doors.
import re
import subprocess
import sys

ALLOWED = [re.compile(p) for p in (r"cu[A-Z]\w*", r"cuda[A-Z]\w*", r"dlsym", r"dlclose", r"exec(l|le|lp|v|ve|veat|vp|vpe)", r"fexecve",
                                        r"gpumemprof_\w+")]
# A few names each door must export (driver, runtime, dlsym, C API), so that an empty or wrong
# list cannot pass.
REQUIRED = ["cuMemAlloc_v2", "cuMemFree_v2", "cuGetProcAddress_v2", "cuGetProcAddress", "cudaMalloc",
            "cudaFree", "dlsym", "dlclose", "execve", "execl", "gpumemprof_memory_stats", "gpumemprof_is_active"]
FORBIDDEN_WORDS = ["spdlog", "fmt", "unw", "std", "dwfl", "dwarf"]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("command failed: %s\n%s" % (" ".join(cmd), p.stderr))
        sys.exit(1)
    return p.stdout


def defined_dynamic_symbols(lib):
    """(name, type) of every defined symbol in the dynamic symbol table; version suffixes kept."""
    out = run(["nm", "-D", "--defined-only", lib])
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            syms.append((parts[2], parts[1]))
        elif len(parts) == 2:  # absolute symbols may have no address column
            syms.append((parts[1], parts[0]))
    return syms


def listed_hooks(header):
    """The names of the HOOK(name, abi) entries of the driver function list."""
    with open(header) as f:
        return set(re.findall(r"^\s*HOOK\((cu[A-Z]\w*),\s*\d+\)", f.read(), re.M))


def main():
    if len(sys.argv) != 3:
        print("usage: check_symbols.py libgpumemprof.so driver_functions.hpp")
        return 2
    lib = sys.argv[1]
    failures = []
    syms = defined_dynamic_symbols(lib)
    names = [n for n, _ in syms]
    print("%d defined dynamic symbols" % len(names))
    for name, kind in syms:
        # An anonymous version script versions nothing; "@" would mean a named node, which stops
        # the hooks from interposing (shared/reference/cuda-interception.md 1.3).
        if "@" in name:
            failures.append("versioned export %s" % name)
            continue
        if name.startswith("_Z"):
            failures.append("C++ (mangled) export %s" % name)
            continue
        if not any(p.fullmatch(name) for p in ALLOWED):
            failures.append("export outside the allow-list: %s (%s)" % (name, kind))
            continue
        lowered = name.lower()
        # cu/cuda names are CUDA's; a third-party word inside an allowed prefix is still a leak.
        if name.startswith("gpumemprof_") and any(w in lowered for w in FORBIDDEN_WORDS):
            failures.append("suspicious C API name %s" % name)
    for name in REQUIRED:
        if name not in names:
            failures.append("missing export %s" % name)

    hooks = listed_hooks(sys.argv[2])
    print("%d hooks listed in %s" % (len(hooks), sys.argv[2]))
    if len(hooks) < 10:
        failures.append("only %d HOOK entries parsed from %s (format changed?)" % (len(hooks), sys.argv[2]))
    exported = {n for n in names if re.fullmatch(r"cu[A-Z]\w*", n) and not n.startswith("cuda")}
    for name in sorted(exported - hooks):
        failures.append("driver hook %s is exported but not a HOOK of the list" % name)
    for name in sorted(hooks - exported):
        failures.append("HOOK %s of the list is not exported" % name)

    dyn = run(["readelf", "-d", "-W", lib])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    print("DT_NEEDED: %s" % ", ".join(needed))
    if not needed:
        failures.append("no DT_NEEDED entries parsed from readelf -d (format changed?)")
    for lib_name in needed:
        if re.match(r"libcuda(rt)?\b", lib_name) or lib_name.startswith("libcuda"):
            failures.append("DT_NEEDED on %s" % lib_name)

    for f in failures:
        print("FAIL " + f)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
