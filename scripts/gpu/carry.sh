#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds libgpumemprof.so and the gpumemprof CLI for the GPU machine (-Dtests=false) and copies
# them, with the shared libraries they need that such a machine may lack (libunwind, elfutils),
# into .carry/ (git-ignored; their RPATH is $ORIGIN). Usage: scripts/gpu/carry.sh [builddir]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-carry}
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dtests=false -Dbuildtype=debugoptimized >/dev/null
ninja -C "$build" >/dev/null
dest=$root/.carry
rm -rf "$dest" && mkdir -p "$dest"
cp "$build/src/libgpumemprof.so" "$build/src/tools/gpumemprof" "$dest/"
for f in "$dest/libgpumemprof.so" "$dest/gpumemprof"; do
  ldd "$f" | awk '/=> \//{print $3}' | while read -r dep; do
    case "$(basename "$dep")" in
      libunwind*|liblzma*|libdw*|libelf*|libbz2*|libzstd*) cp -n "$dep" "$dest/" ;;
    esac
  done
done
# The CPU sampler that finds where a profiled program's time goes (there is no perf there).
g++ -O2 -shared -fPIC -o "$dest/libsampler.so" "$root/scripts/gpu/sampler.cpp" -ldl -lrt -lpthread
strip --strip-debug "$dest/libgpumemprof.so" "$dest/gpumemprof"
# The CLI finds the libraries beside it (no patchelf here to give it an RPATH of $ORIGIN).
mv "$dest/gpumemprof" "$dest/gpumemprof.bin"
printf '#!/bin/sh\nhere=$(dirname "$(readlink -f "$0")")\nLD_LIBRARY_PATH="$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/gpumemprof.bin" "$@"\n' >"$dest/gpumemprof"
chmod +x "$dest/gpumemprof"
ls -la "$dest"
