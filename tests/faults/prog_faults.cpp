// SPDX-License-Identifier: MIT
// The program of the fault-injection suite (run_faults.py): one workload per argv[1], run with and
// without the preload while the simulated driver injects faults (SIMCUDA_FAULTS). It never stops at
// an error: every call's code is printed ("key=value") so the runner can compare what the program
// was told with what the driver said.
#include "common.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

void put_code(const std::string& key, long long code) {
    put(key.c_str(), code);
}

/// 24 requests of 1..12 MiB, every other one freed at once, the rest at the end: each needs a new
/// segment until the pool has cached enough. Codes "alloc.i" (and "free.i").
int workload_alloc() {
    std::vector<void*> keep;
    int failed = 0;
    for (int i = 0; i < 24; ++i) {
        void* p = nullptr;
        const cudaError_t r = cudaMalloc(&p, (static_cast<std::size_t>(i % 12) + 1) * kMiB);
        put_code("alloc." + std::to_string(i), r);
        if (r != cudaSuccess) {
            ++failed;
            EXPECT(p == nullptr);
            continue;
        }
        EXPECT(cudaMemset(p, i, kMiB) == cudaSuccess); // the memory is usable
        if (i % 2)
            put_code("free." + std::to_string(i), cudaFree(p));
        else
            keep.push_back(p);
    }
    // Printed, not required: after a sticky error the driver answers it to frees too.
    for (std::size_t k = 0; k < keep.size(); ++k)
        put_code("free_kept." + std::to_string(k), cudaFree(keep[k]));
    put("failed", failed);
    return 0;
}

/// Reuse under memory pressure (SIMCUDA_CAPACITY): 40 rounds of 3 x 8 MiB allocated and freed,
/// with work queued on a stream in between. With events that never complete, only a synchronous
/// wait can show that a freed block is idle.
int workload_reuse() {
    cudaStream_t s = nullptr;
    EXPECT(cudaStreamCreate(&s) == cudaSuccess);
    int failed = 0;
    for (int round = 0; round < 40; ++round) {
        void* p[3] = {};
        for (int k = 0; k < 3; ++k) {
            const cudaError_t r = cudaMalloc(&p[k], 8 * kMiB);
            failed += r != cudaSuccess;
            if (r == cudaSuccess)
                EXPECT(cudaMemsetAsync(p[k], k, 8 * kMiB, s) == cudaSuccess);
        }
        for (void* q : p)
            if (q)
                EXPECT(cudaFree(q) == cudaSuccess);
    }
    EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
    EXPECT(cudaStreamDestroy(s) == cudaSuccess);
    put("failed", failed);
    return 0;
}

/// Streams: 6 created (codes "stream.i"), an allocation freed after work on each.
int workload_streams() {
    std::vector<cudaStream_t> streams;
    for (int i = 0; i < 6; ++i) {
        cudaStream_t s = nullptr;
        const cudaError_t r = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        put_code("stream." + std::to_string(i), r);
        if (r == cudaSuccess)
            streams.push_back(s);
    }
    int failed = 0;
    for (int round = 0; round < 4; ++round) {
        for (cudaStream_t s : streams) {
            void* p = nullptr;
            const cudaError_t r = cudaMalloc(&p, 2 * kMiB);
            failed += r != cudaSuccess;
            if (r != cudaSuccess)
                continue;
            EXPECT(cudaMemsetAsync(p, 1, 2 * kMiB, s) == cudaSuccess);
            EXPECT(cudaFree(p) == cudaSuccess);
        }
    }
    for (cudaStream_t s : streams) {
        EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
        EXPECT(cudaStreamDestroy(s) == cudaSuccess);
    }
    put("streams", static_cast<long long>(streams.size()));
    put("failed", failed);
    return 0;
}

/// The driver's virtual memory API (pass-through under the preload): 8 rounds of
/// create / reserve / map / set access / unmap / release, codes "create.i", "map.i".
int workload_vmm() {
    EXPECT(cuInit(0) == CUDA_SUCCESS);
    EXPECT(cudaFree(nullptr) == cudaSuccess); // the runtime makes the primary context current
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    std::size_t gran = 0;
    EXPECT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    int mapped = 0;
    for (int i = 0; i < 8; ++i) {
        const std::size_t size = gran * static_cast<std::size_t>(i % 3 + 1);
        CUmemGenericAllocationHandle h = 0;
        CUresult r = cuMemCreate(&h, size, &prop, 0);
        put_code("create." + std::to_string(i), r);
        if (r != CUDA_SUCCESS)
            continue;
        CUdeviceptr va = 0;
        EXPECT(cuMemAddressReserve(&va, size, 0, 0, 0) == CUDA_SUCCESS);
        r = cuMemMap(va, size, 0, h, 0);
        put_code("map." + std::to_string(i), r);
        if (r == CUDA_SUCCESS) {
            ++mapped;
            CUmemAccessDesc acc{};
            acc.location = prop.location;
            acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            EXPECT(cuMemSetAccess(va, size, &acc, 1) == CUDA_SUCCESS);
            EXPECT(cuMemsetD8_v2(va, 7, size) == CUDA_SUCCESS);
            EXPECT(cuMemUnmap(va, size) == CUDA_SUCCESS);
        }
        EXPECT(cuMemAddressFree(va, size) == CUDA_SUCCESS);
        EXPECT(cuMemRelease(h) == CUDA_SUCCESS);
    }
    put("mapped", mapped);
    return 0;
}

/// A context of our own: 4 allocations in it, then the context dies behind everyone's back
/// (SIMCUDA_FAULTS cuDeviceGetName@1=lost: the program's one cuDeviceGetName call, which the
/// profiler never makes), then 4 more allocations. Codes "alloc.i", "free.i", "destroy".
int workload_context() {
    EXPECT(cuInit(0) == CUDA_SUCCESS);
    CUdevice dev = 0;
    EXPECT(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    EXPECT(cuCtxCreate_v2(&ctx, 0, dev) == CUDA_SUCCESS);
    std::vector<CUdeviceptr> live;
    for (int i = 0; i < 8; ++i) {
        if (i == 4) {
            char name[64];
            cuDeviceGetName(name, sizeof name, dev);
        }
        CUdeviceptr p = 0;
        const CUresult r = cuMemAlloc_v2(&p, (static_cast<std::size_t>(i) + 1) * 3 * kMiB);
        put_code("alloc." + std::to_string(i), r);
        if (r == CUDA_SUCCESS)
            live.push_back(p);
    }
    for (std::size_t i = 0; i < live.size(); ++i)
        put_code("free." + std::to_string(i), cuMemFree_v2(live[i]));
    put_code("destroy", cuCtxDestroy_v2(ctx));
    // The runtime's primary context is untouched and still serves.
    void* q = nullptr;
    put_code("runtime_alloc", cudaMalloc(&q, kMiB));
    if (q)
        EXPECT(cudaFree(q) == cudaSuccess);
    return 0;
}

/// Two devices, one cudaSetDevice each: 3 MiB + 5 MiB on device 0, 7 MiB on device 1, all freed.
int workload_two_devices() {
    int n = 0;
    EXPECT(cudaGetDeviceCount(&n) == cudaSuccess);
    put("devices", n);
    EXPECT(n >= 2);
    void *a = nullptr, *b = nullptr, *c = nullptr;
    EXPECT(cudaSetDevice(0) == cudaSuccess);
    EXPECT(cudaMalloc(&a, 3 * kMiB) == cudaSuccess);
    EXPECT(cudaMalloc(&b, 5 * kMiB) == cudaSuccess);
    EXPECT(cudaSetDevice(1) == cudaSuccess);
    EXPECT(cudaMalloc(&c, 7 * kMiB) == cudaSuccess);
    EXPECT(cudaMemset(c, 1, 7 * kMiB) == cudaSuccess);
    int dev = -1;
    EXPECT(cudaPointerGetAttributes != nullptr);
    cudaPointerAttributes attr{};
    EXPECT(cudaPointerGetAttributes(&attr, c) == cudaSuccess);
    put("c_device", attr.device);
    EXPECT(cudaGetDevice(&dev) == cudaSuccess);
    EXPECT(cudaFree(c) == cudaSuccess);
    EXPECT(cudaSetDevice(0) == cudaSuccess);
    EXPECT(cudaFree(a) == cudaSuccess);
    EXPECT(cudaFree(b) == cudaSuccess);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const std::string w = argc > 1 ? argv[1] : "";
    if (w == "alloc")
        return workload_alloc();
    if (w == "reuse")
        return workload_reuse();
    if (w == "streams")
        return workload_streams();
    if (w == "vmm")
        return workload_vmm();
    if (w == "context")
        return workload_context();
    if (w == "two_devices")
        return workload_two_devices();
    std::printf("FAIL unknown workload '%s'\n", w.c_str());
    return 64;
}
