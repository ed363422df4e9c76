// SPDX-License-Identifier: MIT
// Out of memory on a 64 MiB simulated device (SIMCUDA_CAPACITY=64M): a cached-segment retry that
// succeeds, then a real OOM; the program survives both.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <vector>

int main() {
    std::vector<void*> held;
    for (int i = 0; i < 5; ++i) { // 5 x 12 MiB = 60 MiB of 64
        void* p = nullptr;
        MUST(cudaMalloc(&p, 12 * kMiB));
        held.push_back(p);
    }
    MUST(cudaFree(held.back()));
    held.pop_back();
    MUST(cudaDeviceSynchronize());
    void* big = nullptr;
    put("alloc_14m", cudaMalloc(&big, 14 * kMiB)); // needs the 12 MiB the program gave back
    held.push_back(big);
    int more = 0;
    cudaError_t last = cudaSuccess;
    for (;;) {
        void* p = nullptr;
        last = cudaMalloc(&p, 12 * kMiB);
        if (last != cudaSuccess)
            break;
        held.push_back(p);
        ++more;
    }
    put("more_12m", more);
    put("oom_code", last);
    put("last_error", cudaGetLastError());
    for (void* p : held)
        MUST(cudaFree(p));
    void* after = nullptr;
    put("alloc_after_oom", cudaMalloc(&after, kMiB));
    MUST(cudaFree(after));
    void* huge = nullptr;
    put("alloc_1eib", cudaMalloc(&huge, 1ull << 60)); // refused before any pool sees it
    return 0;
}
