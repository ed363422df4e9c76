// SPDX-License-Identifier: MIT
// Plugin A of prog_dlclose_reuse: allocates 7 MiB and keeps it (a leak), then is unloaded.
#include <cuda_runtime_api.h>

extern "C" __attribute__((visibility("default"), noinline)) int plugin_a_leak_7mib(void** out) {
    return cudaMalloc(out, 7u << 20) == cudaSuccess ? 0 : 1;
}
