#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks libgpumemprof.so on a real NVIDIA GPU (see README "Checking on a real GPU").
#   scripts/gpu-check.sh [LIB] [BINDIR] [-- extra gpu_check.py args]
# LIB defaults to build/src/libgpumemprof.so; BINDIR holds the CUDA check programs and is built
# with nvcc (sm_90 + PTX) when they are missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-$here/../build/src/libgpumemprof.so}
bindir=${2:-$here/../build/gpu-check}
shift $(( $# > 2 ? 2 : $# )) || true
[ "${1:-}" = "--" ] && shift
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU here; nothing to check" >&2
  exit 77
fi
"$here/gpu/build-check-programs.sh" "$bindir"
lib=$(readlink -f "$lib")
python3 "$here/gpu/gpu_check.py" --lib "$lib" --bindir "$bindir" "$@"
