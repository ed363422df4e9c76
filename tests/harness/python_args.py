# SPDX-License-Identifier: MIT
"""The command line of a runner that runs programs under one interpreter with the preload on the
simulated device: --python, --lib, --sim-dir, and what else the runner asks for."""
import argparse
import os


def parse_python_args(add_more=None):
    """The parsed arguments, or None when the interpreter is not installed (the runner skips)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="the interpreter under test")
    ap.add_argument("--lib", required=True, help="libgpumemprof.so")
    ap.add_argument("--sim-dir", required=True, help="the simulated libcuda and libcudart")
    if add_more is not None:
        add_more(ap)
    a = ap.parse_args()
    if not os.path.exists(a.python):
        print("SKIP: %s not installed" % a.python)
        return None
    return a
