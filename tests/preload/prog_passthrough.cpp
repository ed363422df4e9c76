// SPDX-License-Identifier: MIT
// Allocation kinds the pool passes through: stream-ordered, managed, pinned host, and VMM (the
// VMM functions fetched the way PyTorch does, cudaGetDriverEntryPointByVersion(name, 12000)).
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
    void* a = nullptr;
    MUST(cudaMallocAsync(&a, 4 * kMiB, nullptr));
    MUST(cudaMemsetAsync(a, 1, 4 * kMiB, nullptr));
    MUST(cudaFreeAsync(a, nullptr));
    MUST(cudaStreamSynchronize(nullptr));

    void* m = nullptr;
    MUST(cudaMallocManaged(&m, 3 * kMiB, cudaMemAttachGlobal));
    static_cast<unsigned char*>(m)[3 * kMiB - 1] = 9; // managed memory is host-accessible
    MUST(cudaFree(m));

    void* h = nullptr;
    MUST(cudaMallocHost(&h, kMiB));
    static_cast<unsigned char*>(h)[0] = 1;
    MUST(cudaFreeHost(h));

    auto create = entry<PFN_cuMemCreate_v10020>("cuMemCreate");
    auto reserve = entry<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve");
    auto map = entry<PFN_cuMemMap_v10020>("cuMemMap");
    auto set_access = entry<PFN_cuMemSetAccess_v10020>("cuMemSetAccess");
    auto unmap = entry<PFN_cuMemUnmap_v10020>("cuMemUnmap");
    auto release = entry<PFN_cuMemRelease_v10020>("cuMemRelease");
    auto addr_free = entry<PFN_cuMemAddressFree_v10020>("cuMemAddressFree");
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr va = 0;
    MUST(create(&handle, 2 * kMiB, &prop, 0));
    MUST(reserve(&va, 2 * kMiB, 0, 0, 0));
    MUST(map(va, 2 * kMiB, 0, handle, 0));
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    MUST(set_access(va, 2 * kMiB, &acc, 1));
    MUST(cudaMemset(reinterpret_cast<void*>(va), 7, 2 * kMiB));
    MUST(cudaDeviceSynchronize());
    MUST(unmap(va, 2 * kMiB));
    MUST(release(handle));
    MUST(addr_free(va, 2 * kMiB));
    put("done", 1);
    return 0;
}
