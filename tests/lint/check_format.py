#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Every C and C++ file git tracks is formatted as .clang-format says (clang-format --dry-run
# --Werror). Exit 77 (skipped) without clang-format or outside a git checkout.
import shutil
import subprocess
import sys


def main():
    root = sys.argv[1]
    exe = shutil.which("clang-format")
    if exe is None:
        print("SKIP clang-format not found (scripts/test.sh installs it)")
        return 77
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "*.c", "*.cpp", "*.h", "*.hpp"],
                                capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        print("SKIP not a git checkout: no file list")
        return 77
    bad = []
    for i in range(0, len(listed), 40):
        part = listed[i:i + 40]
        p = subprocess.run([exe, "--dry-run", "--Werror"] + part, cwd=root, capture_output=True, text=True)
        if p.returncode != 0:
            bad += sorted({line.split(":", 1)[0] for line in p.stderr.splitlines() if ": error:" in line})
    print("%d files checked, %d not formatted" % (len(listed), len(bad)))
    for f in bad:
        print("  not formatted: %s (clang-format -i %s)" % (f, f))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
