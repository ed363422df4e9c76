// SPDX-License-Identifier: MIT
// The allocation loop under fenced reuse: a non-blocking stream exists, so every freed block waits
// for a fence; 1000 allocations of (i % 97 + 1) pages, each freed at once.
#include "common.hpp"

#include <cuda_runtime_api.h>

int main() {
    cudaStream_t s;
    MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < 1000; ++i) {
        void* p = nullptr;
        MUST(cudaMalloc(&p, static_cast<size_t>(i % 97 + 1) * 4096));
        MUST(cudaMemsetAsync(p, 0x5a, 4096, s));
        MUST(cudaFree(p));
    }
    MUST(cudaStreamDestroy(s));
    put("done", 1);
    return 0;
}
