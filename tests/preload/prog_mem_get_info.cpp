// SPDX-License-Identifier: MIT
// cudaMemGetInfo while the pool caches segments: prints how far "free" dropped from its initial value.
#include "common.hpp"

#include <cuda_runtime_api.h>

int main() {
    MUST(cudaFree(nullptr)); // create the context
    size_t f0 = 0, total = 0, f = 0, t = 0;
    MUST(cudaMemGetInfo(&f0, &total));
    put("total", static_cast<long long>(total));
    void *a, *b;
    MUST(cudaMalloc(&a, 3 * kMiB));
    MUST(cudaMalloc(&b, 1000));
    MUST(cudaMemGetInfo(&f, &t));
    put("drop_both_live", static_cast<long long>(f0 - f));
    MUST(cudaFree(a));
    MUST(cudaDeviceSynchronize());
    MUST(cudaMemGetInfo(&f, &t));
    put("drop_b_live", static_cast<long long>(f0 - f));
    MUST(cudaFree(b));
    MUST(cudaDeviceSynchronize());
    MUST(cudaMemGetInfo(&f, &t));
    put("drop_none_live", static_cast<long long>(f0 - f));
    // The case, with a stream so that freed blocks wait for fences: 100 x 10 MiB allocated
    // and freed, a device-wide synchronize, then the first query must see all of it free.
    cudaStream_t s;
    MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void* p[100];
    for (auto& q : p)
        MUST(cudaMalloc(&q, 10 * kMiB));
    for (auto& q : p)
        MUST(cudaFree(q));
    MUST(cudaDeviceSynchronize());
    MUST(cudaMemGetInfo(&f, &t));
    put("drop_after_100_frees_sync", static_cast<long long>(f0 - f));
    MUST(cudaStreamDestroy(s));
    return 0;
}
