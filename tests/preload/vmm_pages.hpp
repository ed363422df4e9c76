// SPDX-License-Identifier: MIT
// VMM for the preload case programs: the driver's functions fetched the way PyTorch does
// (cudaGetDriverEntryPointByVersion(name, 12000)), and pages created, reserved, mapped and made
// accessible on device 0.
#pragma once

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

struct VmmPages {
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr va = 0;
};

/// `bytes` of device 0's memory, mapped read-write at a reserved range of their own.
inline VmmPages map_pages(std::size_t bytes) {
    auto create = entry<PFN_cuMemCreate_v10020>("cuMemCreate");
    auto reserve = entry<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve");
    auto map = entry<PFN_cuMemMap_v10020>("cuMemMap");
    auto set_access = entry<PFN_cuMemSetAccess_v10020>("cuMemSetAccess");
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    VmmPages p;
    MUST(create(&p.handle, bytes, &prop, 0));
    MUST(reserve(&p.va, bytes, 0, 0, 0));
    MUST(map(p.va, bytes, 0, p.handle, 0));
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    MUST(set_access(p.va, bytes, &acc, 1));
    return p;
}

/// Gives back what map_pages(bytes) made: unmapped, the pages released, the range freed.
inline void unmap_pages(const VmmPages& p, std::size_t bytes) {
    MUST(entry<PFN_cuMemUnmap_v10020>("cuMemUnmap")(p.va, bytes));
    MUST(entry<PFN_cuMemRelease_v10020>("cuMemRelease")(p.handle));
    MUST(entry<PFN_cuMemAddressFree_v10020>("cuMemAddressFree")(p.va, bytes));
}
