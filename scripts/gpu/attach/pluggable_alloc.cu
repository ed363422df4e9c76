// SPDX-License-Identifier: MIT
// Allocators for torch.cuda.memory.CUDAPluggableAllocator, as programs write them (a serving
// engine's MemPool for sleep mode, NCCL's registered buffers): `plain_*` through cudaMalloc
// (nvcc links the static cudart), `vmm_*` through the driver's virtual memory calls, `async_*`
// through cudaMallocAsync on PyTorch's stream, `managed_*` through cudaMallocManaged (as programs
// that oversubscribe the device do).
// Built by scripts/gpu/build-check-programs.sh as pluggable_alloc.so.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <mutex>
#include <unordered_map>

namespace {

struct Mapping {
    CUmemGenericAllocationHandle handle;
    size_t size;
};
std::mutex g_mutex;
std::unordered_map<CUdeviceptr, Mapping>* g_maps = new std::unordered_map<CUdeviceptr, Mapping>();

/// `alloc(&p)` with `device` current, as PyTorch asks for memory of a device; the previous
/// device current again after it.
template <typename Alloc>
void* on_device(int device, Alloc&& alloc) {
    void* p = nullptr;
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    if (alloc(&p) != cudaSuccess)
        p = nullptr;
    cudaSetDevice(previous);
    return p;
}

}  // namespace

extern "C" {

void* plain_malloc(size_t size, int device, cudaStream_t) {
    return on_device(device, [&](void** p) { return cudaMalloc(p, size); });
}

void plain_free(void* p, size_t, int, cudaStream_t) {
    cudaFree(p);
}

void* vmm_malloc(size_t size, int device, cudaStream_t) {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t granularity = 0;
    if (cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
        return nullptr;
    const size_t bytes = (size + granularity - 1) / granularity * granularity;
    CUmemGenericAllocationHandle handle = 0;
    if (cuMemCreate(&handle, bytes, &prop, 0) != CUDA_SUCCESS)
        return nullptr;
    CUdeviceptr va = 0;
    if (cuMemAddressReserve(&va, bytes, 0, 0, 0) != CUDA_SUCCESS) {
        cuMemRelease(handle);
        return nullptr;
    }
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cuMemMap(va, bytes, 0, handle, 0) != CUDA_SUCCESS || cuMemSetAccess(va, bytes, &access, 1) != CUDA_SUCCESS) {
        cuMemUnmap(va, bytes);
        cuMemAddressFree(va, bytes);
        cuMemRelease(handle);
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    (*g_maps)[va] = Mapping{handle, bytes};
    return reinterpret_cast<void*>(va);
}

void vmm_free(void* p, size_t, int, cudaStream_t stream) {
    Mapping m{};
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        auto it = g_maps->find(reinterpret_cast<CUdeviceptr>(p));
        if (it == g_maps->end()) {
            std::fprintf(stderr, "vmm_free: unknown pointer %p\n", p);
            return;
        }
        m = it->second;
        g_maps->erase(it);
    }
    cudaStreamSynchronize(stream);
    const CUdeviceptr va = reinterpret_cast<CUdeviceptr>(p);
    cuMemUnmap(va, m.size);
    cuMemAddressFree(va, m.size);
    cuMemRelease(m.handle);
}

void* async_malloc(size_t size, int device, cudaStream_t stream) {
    return on_device(device, [&](void** p) { return cudaMallocAsync(p, size, stream); });
}

void async_free(void* p, size_t, int, cudaStream_t stream) {
    cudaFreeAsync(p, stream);
}

void* managed_malloc(size_t size, int device, cudaStream_t) {
    return on_device(device, [&](void** p) { return cudaMallocManaged(p, size, cudaMemAttachGlobal); });
}

void managed_free(void* p, size_t, int, cudaStream_t) {
    cudaFree(p);
}

}  // extern "C"
