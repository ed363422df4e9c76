// SPDX-License-Identifier: MIT
// cudaDeviceReset between allocations: the old pool must go with the old context, a new one serves
// what comes after, and a free of a pre-reset pointer gets the driver's answer.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <vector>

int main() {
    void *a = nullptr, *b = nullptr, *c = nullptr;
    MUST(cudaMalloc(&a, kMiB));     // small pool: a 2 MiB segment
    MUST(cudaMalloc(&b, 3 * kMiB)); // large pool: a 20 MiB segment
    MUST(cudaFree(b));
    put("reset", cudaDeviceReset());
    MUST(cudaMalloc(&c, 5 * kMiB)); // after the reset: a new 20 MiB segment in a new pool
    MUST(cudaMemset(c, 3, 5 * kMiB));
    std::vector<unsigned char> h(5 * kMiB);
    MUST(cudaMemcpy(h.data(), c, h.size(), cudaMemcpyDeviceToHost));
    for (unsigned char x : h)
        EXPECT(x == 3);
    put("c_is_a", c == a);
    put("free_old_a", cudaFree(a)); // a died with the old context
    put("last_error", cudaGetLastError());
    MUST(cudaFree(c));
    return 0;
}
