#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Lists the CPython interpreters the Python tests run under, one "name path" per line: every
# pyenv version 3.10 and newer ($PYENV_ROOT or ~/.pyenv), the system's python3, and the newer
# releases scripts/fetch-pythons.sh unpacked ($GPUMEMPROF_PYTHONS or ~/.cache/gpumemprof/pythons).
import glob
import os
import re

root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
seen = set()
for path in sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python3"))):
    version = os.path.basename(os.path.dirname(os.path.dirname(path)))
    m = re.fullmatch(r"3\.(\d+)\.\d+", version)
    if m and int(m.group(1)) >= 10:
        print("pyenv-%s %s" % (version, path))
fetched = os.environ.get("GPUMEMPROF_PYTHONS") or os.path.expanduser("~/.cache/gpumemprof/pythons")
for path in sorted(glob.glob(os.path.join(fetched, "*", "bin", "python3.*"))):
    print("debian-%s %s" % (os.path.basename(os.path.dirname(os.path.dirname(path))), path))
for path in ("/usr/bin/python3",):
    if os.path.exists(path):
        print("system %s" % os.path.realpath(path))
