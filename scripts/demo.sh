#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: build libgpumemprof.so and run a demo program under it - on the GPU when there is
# one (nvidia-smi works and nvcc exists), else on the simulated CUDA device of tests/sim. Installs
# missing Debian packages first. Reports land in ./demo-out/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/install-deps.sh"
build=${BUILD_DIR:-$root/build}
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release >/dev/null
meson compile -C "$build" >/dev/null
out="$root/demo-out"
rm -rf "$out"
mkdir -p "$out"
lib="$build/src/libgpumemprof.so"
cuda=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
nvcc=$(command -v nvcc || echo "$cuda/bin/nvcc")
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ -x "$nvcc" ]; then
  echo "demo: real GPU: $(nvidia-smi -L | head -1)"
  # -g: host debug info, so that the report names file:line (device code needs none here)
  "$nvcc" -O2 -g -x cu "$root/scripts/demo/demo_app.cpp" -o "$out/demo_app"
  env=()
else
  echo "demo: no GPU here: using the simulated CUDA driver and runtime (tests/sim), 2 GiB device"
  g++ -O2 -g -I"$cuda/include" "$root/scripts/demo/demo_app.cpp" -o "$out/demo_app" \
      -L"$build/tests/sim" -lcudart -Wl,-rpath,"$build/tests/sim"
  env=(LD_LIBRARY_PATH="$build/tests/sim" SIMCUDA_CAPACITY=2G)
fi
env "${env[@]}" GPUMEMPROF_OUTPUT="$out/demo" LD_PRELOAD="$lib" "$out/demo_app"
echo
echo "=== $out/demo.txt (first 60 lines) ==="
head -n 60 "$out/demo.txt"
echo "..."
echo "Reports: $out/demo.json (stats), $out/demo.txt (summary, top sites, line profile, leaks, OOMs),"
echo "         $out/demo.html (timeline, flame graph, tree: open in a browser), $out/demo.pickle (PyTorch's memory_viz),"
echo "         $out/demo.folded and $out/demo.alloc.folded (flamegraph.pl / speedscope)"
