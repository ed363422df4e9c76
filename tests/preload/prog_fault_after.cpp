// SPDX-License-Identifier: MIT
// A program's memory calls after a kernel of it faulted (case fault_after). The simulated driver
// makes the first launch's context sticky (SIMCUDA_FAULTS=cuLaunchKernel@1=sticky:710): from then
// on it answers CUDA_ERROR_ASSERT, as a real one does after a device-side assert. argv[1] says
// how the program learns of it first: "device" (cudaDeviceSynchronize), "stream"
// (cudaStreamSynchronize), "launch" (its next kernel launch), "copy" (reading a result back with
// cudaMemcpy), "copy_async" (cudaMemcpyAsync), "memset" (cudaMemset), "memset_async"
// (cudaMemsetAsync), "free" (cudaFree of another block, which synchronises). Each call's code is
// printed.
#include "common.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

int main(int argc, char** argv) {
    const char* notice = argc > 1 ? argv[1] : "device";
    void *small = nullptr, *large = nullptr, *spare = nullptr;
    unsigned char host[64] = {};
    MUST(cudaMalloc(&small, 4096));
    MUST(cudaMalloc(&large, 32 * kMiB));
    MUST(cudaMalloc(&spare, 4096));
    void* victim = nullptr; // freed first in the "free" mode
    MUST(cudaMalloc(&victim, 4096));
    MUST(cudaMemset(small, 1, 4096));
    MUST(cudaDeviceSynchronize());
    MUST(cudaFree(spare)); // a block the pool keeps, which it could hand out again after the fault
    cudaStream_t s = nullptr;
    MUST(cudaStreamCreate(&s));
    const char image[] = "any module";
    CUmodule module = nullptr;
    CUfunction kernel = nullptr;
    MUST(cuModuleLoadData(&module, image));
    MUST(cuModuleGetFunction(&kernel, module, "kernel"));
    MUST(cuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr)); // it faults on the device
    if (std::strcmp(notice, "device") == 0)
        put("sync", cudaDeviceSynchronize());
    else if (std::strcmp(notice, "stream") == 0)
        put("sync", cudaStreamSynchronize(s));
    else if (std::strcmp(notice, "copy") == 0)
        put("sync", cudaMemcpy(host, small, sizeof host, cudaMemcpyDeviceToHost));
    else if (std::strcmp(notice, "copy_async") == 0)
        put("sync", cudaMemcpyAsync(host, small, sizeof host, cudaMemcpyDeviceToHost, s));
    else if (std::strcmp(notice, "memset") == 0)
        put("sync", cudaMemset(small, 0, 4096));
    else if (std::strcmp(notice, "memset_async") == 0)
        put("sync", cudaMemsetAsync(small, 0, 4096, s));
    else if (std::strcmp(notice, "free") == 0)
        put("sync", cudaFree(victim));
    else
        put("sync", cuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
    void* again = nullptr;
    put("malloc_small_after", cudaMalloc(&again, 4096));
    put("free_small", cudaFree(small));
    put("free_large", cudaFree(large));
    void* big = nullptr;
    put("malloc_large_after", cudaMalloc(&big, 32 * kMiB));
    size_t f = 0, t = 0;
    put("mem_get_info", cudaMemGetInfo(&f, &t));
    put("last_error", cudaGetLastError());
    return 3;
}
