// SPDX-License-Identifier: MIT
// Plugin B of prog_dlclose_reuse: loaded where plugin A was; allocates and frees 1 MiB.
#include <cuda_runtime_api.h>

extern "C" __attribute__((visibility("default"), noinline)) int plugin_b_use_1mib() {
    void* p = nullptr;
    if (cudaMalloc(&p, 1u << 20) != cudaSuccess)
        return 1;
    return cudaFree(p) == cudaSuccess ? 0 : 1;
}
