#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The gpumemprof Python package (python/gpumemprof) under one interpreter: without the preload
# (clear error, no crash), under it (prog_package.py checks every function by value), and the
# zero-configuration variables (set when unset, the user's value wins, opt-out, pool off).
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--sim-dir", required=True)
    a = ap.parse_args()
    failures = []

    def check(what, cond, detail=""):
        print("  %s %s%s" % ("ok  " if cond else "FAIL", what, "" if cond else "  " + str(detail)[-3000:]))
        if not cond:
            failures.append(what)

    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GPUMEMPROF_", "SIMCUDA_", "PYTHON", "XLA_", "PYTORCH_"))}
    base.pop("LD_PRELOAD", None)
    base["PYTHONPATH"] = os.path.join(REPO, "python")
    base["LD_LIBRARY_PATH"] = os.path.abspath(a.sim_dir)
    asan = os.environ.get("GPUMEMPROF_TEST_ASAN_RUNTIME", "")
    preload = " ".join(([asan] if asan else []) + [os.path.abspath(a.lib)])
    with tempfile.TemporaryDirectory() as tmp:
        # 1. Without the library: importable, says so clearly.
        code = ("import gpumemprof as g\nprint('available=%s' % g.is_available())\n"
                "try:\n    g.memory_allocated()\nexcept g.NotLoadedError as e:\n    print('error=%s' % e)\n")
        p = subprocess.run([a.python, "-c", code], env=base, capture_output=True, text=True, timeout=60)
        check("without the preload: import works, is_available() is False",
              p.returncode == 0 and "available=False" in p.stdout, (p.returncode, p.stdout, p.stderr))
        check("without the preload: NotLoadedError says how to load it",
              "error=libgpumemprof.so is not loaded" in p.stdout and "LD_PRELOAD=" in p.stdout, p.stdout)

        # 2. Under the preload: every function by value.
        env = dict(base, LD_PRELOAD=preload, SIMCUDA_CAPACITY="64M", PKG_TEST_DIR=tmp,
                   GPUMEMPROF_OUTPUT=os.path.join(tmp, "out"), ASAN_OPTIONS="detect_leaks=0")
        p = subprocess.run([a.python, os.path.join(HERE, "prog_package.py")], env=env, capture_output=True, text=True,
                           timeout=120)
        print(p.stdout, end="")
        check("prog_package.py passes", p.returncode == 0, p.stderr)

        # 3. Zero configuration: the user's value wins; opt-out; nothing with the pool off.
        show = "import os; print(os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING'), os.environ.get('XLA_PYTHON_CLIENT_ALLOCATOR'))"
        # PyTorch's caching is switched off only with GPUMEMPROF_TORCH=pool (default: attach).
        # and JAX's BFC allocator is left alone unless GPUMEMPROF_JAX=platform.
        for extra, want in (({}, "None None"),
                            ({"GPUMEMPROF_TORCH": "pool"}, "1 None"),
                            ({"GPUMEMPROF_JAX": "platform"}, "None platform"),
                            ({"GPUMEMPROF_TORCH": "pool", "GPUMEMPROF_JAX": "platform"}, "1 platform"),
                            ({"GPUMEMPROF_TORCH": "pool", "PYTORCH_NO_CUDA_MEMORY_CACHING": "0"}, "0 None"),
                            ({"GPUMEMPROF_TORCH": "off"}, "None None"),
                            ({"GPUMEMPROF_TORCH": "pool", "GPUMEMPROF_FRAMEWORK_ENV": "0"}, "None None"),
                            ({"GPUMEMPROF_TORCH": "pool", "GPUMEMPROF_POOL": "0"}, "None None")):
            e = dict(base, LD_PRELOAD=preload, GPUMEMPROF_OUTPUT="none", **extra)
            p = subprocess.run([a.python, "-c", show], env=e, capture_output=True, text=True, timeout=60)
            check("framework variables with %s: %s" % (extra, want), p.stdout.strip() == want, (p.stdout, p.stderr))
        # Set by a parent under the preload (a launcher, pyenv's shim): still listed as ours.
        code = ("import gpumemprof as g, json, sys; g.dump(sys.argv[1]); "
                "print(json.load(open(sys.argv[1] + '.json'))['framework_env'])")
        prefix = os.path.join(tmp, "inherited")
        e = dict(base, LD_PRELOAD=preload, GPUMEMPROF_OUTPUT="none", GPUMEMPROF_TORCH="pool", GPUMEMPROF_JAX="platform")
        p = subprocess.run(["/bin/sh", "-c", '"$0" -c "$1" "$2"', a.python, code, prefix], env=e,
                           capture_output=True, text=True, timeout=60)
        check("variables set by a parent under the preload are listed in the child's report",
              p.stdout.strip() == "['PYTORCH_NO_CUDA_MEMORY_CACHING=1', 'XLA_PYTHON_CLIENT_ALLOCATOR=platform']",
              (p.stdout, p.stderr))
        e = dict(e, PYTORCH_NO_CUDA_MEMORY_CACHING="0",
                 GPUMEMPROF_FRAMEWORK_ENV_SET="PYTORCH_NO_CUDA_MEMORY_CACHING=1")
        p = subprocess.run([a.python, "-c", code, prefix + "2"], env=e, capture_output=True, text=True, timeout=60)
        check("a user's own value is never listed as ours",
              p.stdout.strip() == "['XLA_PYTHON_CLIENT_ALLOCATOR=platform']", (p.stdout, p.stderr))
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
