// SPDX-License-Identifier: MIT
// Driver functions fetched through the runtime (cudaGetDriverEntryPointByVersion and
// cudaGetDriverEntryPoint, which reach the driver through cuGetProcAddress), then called directly.
// Built against the shared and the static runtime (cases entry_point_shared, entry_point_static).
#include "common.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

int main() {
    MUST(cudaFree(nullptr)); // create the primary context
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
    MUST(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &st));
    put("alloc_status", st);
    EXPECT(fn != nullptr);
    auto mem_alloc = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(fn);
    fn = nullptr;
    st = cudaDriverEntryPointSymbolNotFound;
    MUST(cudaGetDriverEntryPoint("cuMemFree", &fn, cudaEnableDefault, &st));
    put("free_status", st);
    EXPECT(fn != nullptr);
    auto mem_free = reinterpret_cast<CUresult (*)(CUdeviceptr)>(fn);

    CUdeviceptr a = 0, b = 0, c = 0, d = 0;
    MUST(mem_alloc(&a, 3 * kMiB));
    MUST(mem_alloc(&b, 17 * kMiB));
    MUST(mem_alloc(&d, 1000));
    MUST(cudaMemset(reinterpret_cast<void*>(a), 1, 3 * kMiB));
    MUST(cudaMemset(reinterpret_cast<void*>(b), 2, 17 * kMiB));
    MUST(cudaMemset(reinterpret_cast<void*>(d), 3, 1000));
    MUST(mem_free(a));
    MUST(cudaDeviceSynchronize()); // the free is complete: the pool may hand the block out again
    MUST(mem_alloc(&c, 3 * kMiB));
    put("c_reuses_a", c == a);
    MUST(mem_free(b));
    MUST(mem_free(c));
    MUST(mem_free(d));
    put("program_mallocs", 4);
    return 0;
}
