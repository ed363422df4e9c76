#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`meson install` into a scratch DESTDIR: the public header, the pkg-config file and the library
land where pkg-config says, and a C program built with `pkg-config --cflags gpumemprof` alone
compiles, links and runs without the profiler (every C API function is weak)."""
import argparse
import glob
import os
import shlex
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meson", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--cc", required=True, help="the C compiler command (words separated by spaces)")
    a = ap.parse_args()
    failures = []

    def check(what, ok, detail=""):
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else "  " + str(detail)[-1500:]))
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="gpumemprof_install_") as dest:
        p = subprocess.run([a.meson, "install", "-C", a.build_dir, "--no-rebuild", "--destdir", dest, "--quiet"],
                           capture_output=True, text=True, timeout=300)
        check("meson install: exit code 0", p.returncode == 0, p.stdout + p.stderr)
        headers = glob.glob(os.path.join(dest, "**", "include", "gpumemprof", "gpumemprof.h"), recursive=True)
        check("the header is installed as <prefix>/include/gpumemprof/gpumemprof.h", len(headers) == 1, headers)
        pcs = glob.glob(os.path.join(dest, "**", "pkgconfig", "gpumemprof.pc"), recursive=True)
        check("gpumemprof.pc is installed", len(pcs) == 1, pcs)
        libs = glob.glob(os.path.join(dest, "**", "libgpumemprof.so"), recursive=True)
        check("libgpumemprof.so is installed", len(libs) == 1, libs)
        if failures:
            return 1
        # Read through pkg-config with the DESTDIR as its sysroot (the .pc names the prefix).
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]), PKG_CONFIG_SYSROOT_DIR=dest)
        cflags = subprocess.run(["pkg-config", "--cflags", "gpumemprof"], capture_output=True, text=True, env=env)
        check("pkg-config --cflags gpumemprof", cflags.returncode == 0, cflags.stderr)
        inc = [f[2:] for f in cflags.stdout.split() if f.startswith("-I")]
        check("-I names the installed include directory", os.path.dirname(os.path.dirname(headers[0])) in inc,
              (cflags.stdout, headers[0]))
        libs_out = subprocess.run(["pkg-config", "--libs", "gpumemprof"], capture_output=True, text=True, env=env)
        check("no library to link (Libs empty)", libs_out.returncode == 0 and libs_out.stdout.strip() == "",
              libs_out.stdout)
        preload = subprocess.run(["pkg-config", "--variable=preload", "gpumemprof"], capture_output=True, text=True,
                                 env=env)
        check("the preload variable names the installed library",
              os.path.realpath(dest + preload.stdout.strip()) == os.path.realpath(libs[0]) or
              os.path.realpath(preload.stdout.strip()) == os.path.realpath(libs[0]), (preload.stdout, libs[0]))
        src = os.path.join(dest, "use.c")
        with open(src, "w") as f:
            f.write("#include <gpumemprof/gpumemprof.h>\n#include <stdio.h>\n"
                    "int main(void) { printf(\"available=%d\\n\", gpumemprof_available()); return 0; }\n")
        exe = os.path.join(dest, "use")
        cc = subprocess.run([*shlex.split(a.cc), *cflags.stdout.split(), src, "-o", exe], capture_output=True, text=True)
        check("a C program compiles and links with the pkg-config flags alone", cc.returncode == 0, cc.stderr)
        if cc.returncode == 0:
            run = subprocess.run([exe], capture_output=True, text=True, env={k: v for k, v in os.environ.items()
                                                                            if k != "LD_PRELOAD"})
            check("it runs without the profiler: available=0", run.stdout.strip() == "available=0",
                  run.stdout + run.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
