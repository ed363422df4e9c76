# SPDX-License-Identifier: MIT
"""The environment of a program run on the simulated CUDA device (tests/sim), with or without
LD_PRELOAD=libgpumemprof.so: one definition for the preload, hostile, golden and python tests,
the fault suite and the benchmarks.

Import it from a driver with:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
    from preload_env import preload_env
(bench/ drivers use "..", "tests", "harness").
"""
import os

# Settings of ours and of the simulated driver that a caller's shell may hold: a run starts
# without them, so that only what the driver sets applies.
_OWN_PREFIXES = ("GPUMEMPROF_", "SIMCUDA_")


def asan_runtime_from_env():
    """The ASan runtime meson passes to the tests of an ASan build (tests/meson.build), or ""."""
    return os.environ.get("GPUMEMPROF_TEST_ASAN_RUNTIME", "")


def preload_env(sim_dir, lib=None, asan_runtime="", lib_dirs=(), output=None, leak_check=True, clean=True,
                extra=None):
    """The caller's environment without LD_PRELOAD (and, with `clean`, without GPUMEMPROF_* and
    SIMCUDA_* settings); LD_LIBRARY_PATH: `sim_dir` (the simulated libcuda.so.1 and libcudart),
    then `lib_dirs`, then the caller's path; GPUMEMPROF_OUTPUT=`output` when given; with `lib`,
    LD_PRELOAD=`lib`, after `asan_runtime` when given (an ASan-instrumented library needs the ASan
    runtime loaded first); `leak_check=False` appends detect_leaks=0 to ASAN_OPTIONS (later flags
    win over the caller's); then `extra`."""
    env = {k: v for k, v in os.environ.items() if not (clean and k.startswith(_OWN_PREFIXES))}
    env.pop("LD_PRELOAD", None)
    path = [os.path.abspath(sim_dir)] + [os.path.abspath(d) for d in lib_dirs]
    if env.get("LD_LIBRARY_PATH"):
        path.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = ":".join(path)
    if output is not None:
        env["GPUMEMPROF_OUTPUT"] = output
    if lib:
        env["LD_PRELOAD"] = " ".join(([asan_runtime] if asan_runtime else []) + [os.path.abspath(lib)])
    if not leak_check:
        env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "detect_leaks=0") if x)
    env.update(extra or {})
    return env
