#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# For one CPython: compiles python_layout.c against its own internal headers, runs it, and checks
# that every layout fact the frame reader assumes (dump_layout <minor>) equals the real one.
import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def table(text):
    return dict((l.split()[0], int(l.split()[1])) for l in text.splitlines() if l.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    a = ap.parse_args()
    info = subprocess.run([a.python, "-c", "import sys, sysconfig; print(sys.version_info[1]); "
                           "print(sysconfig.get_paths()['include'])"], capture_output=True, text=True)
    minor, include = info.stdout.split("\n")[:2]
    if not os.path.exists(os.path.join(include, "internal", "pycore_frame.h")):
        print("SKIP: no internal headers in %s" % include)
        return 77
    assumed = table(subprocess.run([a.dump, minor], capture_output=True, text=True, check=True).stdout)
    if not assumed:
        print("Python 3.%s: not a version the reader supports; nothing to compare" % minor)
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "layout")
        # The parent too: Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>.
        c = subprocess.run([a.cc, "-I" + include, "-I" + os.path.join(include, "internal"),
                            "-I" + os.path.dirname(include),
                            os.path.join(HERE, "python_layout.c"), "-o", exe], capture_output=True, text=True)
        if c.returncode != 0:
            print("FAIL: cannot compile against %s:\n%s" % (include, c.stderr[-3000:]))
            return 1
        real = table(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)
    bad = 0
    for name in sorted(set(assumed) | set(real)):
        ok = assumed.get(name) == real.get(name)
        bad += not ok
        print("  %s %-45s assumed=%s real=%s" % ("ok  " if ok else "FAIL", name, assumed.get(name), real.get(name)))
    print("Python 3.%s (%s): %d facts, %d differ" % (minor, include, len(real), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
