// SPDX-License-Identifier: MIT
// The device's first memory is VMM physical memory (cuMemCreate, mapped), as under PyTorch's
// expandable segments; a cudaMalloc follows. The driver's used figure before the first
// allocation is the context alone: the VMM pages are not part of it.
#include "common.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

template <class F> F entry(const char* name) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult st{};
    MUST(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &st));
    EXPECT(st == cudaDriverEntryPointSuccess && p != nullptr);
    return reinterpret_cast<F>(p);
}

int main() {
    MUST(cudaSetDevice(0));
    MUST(cudaFree(nullptr)); // the context, no memory
    std::size_t free_bytes = 0, total = 0;
    MUST(cudaMemGetInfo(&free_bytes, &total));
    put("used_before_first_alloc_mib", static_cast<long long>((total - free_bytes) / kMiB));
    auto create = entry<PFN_cuMemCreate_v10020>("cuMemCreate");
    auto reserve = entry<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve");
    auto map = entry<PFN_cuMemMap_v10020>("cuMemMap");
    auto set_access = entry<PFN_cuMemSetAccess_v10020>("cuMemSetAccess");
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr va = 0;
    MUST(create(&handle, 8 * kMiB, &prop, 0));
    MUST(reserve(&va, 8 * kMiB, 0, 0, 0));
    MUST(map(va, 8 * kMiB, 0, handle, 0));
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    MUST(set_access(va, 8 * kMiB, &acc, 1));
    void* p = nullptr;
    MUST(cudaMalloc(&p, 4 * kMiB));
    MUST(cudaMemGetInfo(&free_bytes, &total));
    put("used_with_both_mib", static_cast<long long>((total - free_bytes) / kMiB));
    MUST(cudaFree(p));
    put("done", 1);
    return 0; // the VMM memory stays mapped until exit
}
