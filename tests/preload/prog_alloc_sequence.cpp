// SPDX-License-Identifier: MIT
// Fixed cudaMalloc/cudaFree sequence (cases shared_cudart, static_cudart, pool_off, bad_config).
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <vector>

namespace {
void fill(void* p, size_t n, int v) {
    MUST(cudaMemset(p, v, n));
}

/// Every byte of the device buffer still holds v (no other allocation overlapped it).
void verify(void* p, size_t n, int v) {
    std::vector<unsigned char> h(n);
    MUST(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i)
        EXPECT(h[i] == static_cast<unsigned char>(v));
}
} // namespace

int main() {
    void *a, *b, *c, *d, *e, *f;
    MUST(cudaMalloc(&a, 1000));
    fill(a, 1000, 1);
    MUST(cudaMalloc(&b, kMiB));
    fill(b, kMiB, 2);
    MUST(cudaMalloc(&c, 3 * kMiB));
    fill(c, 3 * kMiB, 3);
    MUST(cudaMalloc(&d, 25 * kMiB));
    fill(d, 25 * kMiB, 4);
    MUST(cudaFree(a));
    // Let the free complete on the device before the next request, so that the pool may reuse
    // the block whatever its reuse fence is (the expected numbers assume reuse).
    MUST(cudaDeviceSynchronize());
    MUST(cudaMalloc(&e, 700));
    fill(e, 700, 5);
    MUST(cudaFree(c));
    MUST(cudaDeviceSynchronize());
    MUST(cudaMalloc(&f, 5 * kMiB));
    fill(f, 5 * kMiB, 6);
    verify(b, kMiB, 2);
    verify(d, 25 * kMiB, 4);
    verify(e, 700, 5);
    verify(f, 5 * kMiB, 6);
    MUST(cudaFree(b));
    MUST(cudaFree(d));
    MUST(cudaFree(e));
    MUST(cudaFree(f));
    put("program_mallocs", 6);
    put("program_frees", 6);
    return 0;
}
