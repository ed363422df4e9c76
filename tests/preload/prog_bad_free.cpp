// SPDX-License-Identifier: MIT
// Double, interior and unknown-pointer cudaFree: the codes must not change under the profiler, and
// the pool must stay intact.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <vector>

int main() {
    void *a, *b, *c;
    MUST(cudaMalloc(&a, 4096));
    MUST(cudaMalloc(&b, 8192));
    MUST(cudaMemset(b, 0x3c, 8192));
    MUST(cudaFree(a));
    MUST(cudaDeviceSynchronize());
    put("double_free", cudaFree(a));
    put("interior_free", cudaFree(static_cast<char*>(b) + 512));
    put("unknown_free", cudaFree(reinterpret_cast<void*>(0x7f0000123400ull)));
    put("last_error", cudaGetLastError());
    put("last_error_after", cudaGetLastError());
    // The pool still works and b was not touched.
    MUST(cudaMalloc(&c, 4096));
    MUST(cudaMemset(c, 0x11, 4096));
    std::vector<unsigned char> h(8192);
    MUST(cudaMemcpy(h.data(), b, 8192, cudaMemcpyDeviceToHost));
    for (unsigned char x : h)
        EXPECT(x == 0x3c);
    MUST(cudaFree(b));
    MUST(cudaFree(c));
    put("program_mallocs", 3);
    return 0;
}
