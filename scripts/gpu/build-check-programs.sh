#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the CUDA programs used by gpu-check.sh into $1 (skips what is already there).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
build() { [ -x "$out/$1" ] || "$nvcc" -O2 $arch "${@:2}" -o "$out/$1"; }
build alloc_pattern_static "$here/alloc_pattern.cu" -cudart=static
build alloc_pattern_shared "$here/alloc_pattern.cu" -cudart=shared
build cross_stream "$here/cross_stream.cu"
build alloc_bench "$here/alloc_bench.cu"
build samples_mix "$here/samples_mix.cu" -lcuda -cudart=shared
build samples_mix_ptds_static "$here/samples_mix.cu" -lcuda -cudart=static --default-stream per-thread
build fault_after "$here/fault_after.cu" -lcuda -cudart=shared
# attach_check.py's CUDAPluggableAllocator (a shared library; cudart linked statically into it).
build pluggable_alloc.so "$here/attach/pluggable_alloc.cu" -shared -Xcompiler -fPIC -lcuda -cudart=static
