// SPDX-License-Identifier: MIT
#include "intercept/hook_table.hpp"

#include "core/driver_api.hpp"

#include "core/cuda_api.hpp"

#include <cstring>

namespace gpumemprof::intercept {
namespace {

struct Entry {
    const char* name;  ///< exported spelling
    const char* base;  ///< cuGetProcAddress spelling
    int abi;           ///< cudaTypedefs.h PFN version that introduced this ABI
    bool ptsz;         ///< per-thread default stream variant
    void* wrapper;
    const void* (*real)(const core::DriverApi&);
};

#define GPUMEMPROF_ENTRY(name, base, abi, ptsz)                                                     \
    Entry{#name, base, abi, ptsz, reinterpret_cast<void*>(&::name),                                 \
          [](const core::DriverApi& a) { return reinterpret_cast<const void*>(a.name); }}

const Entry kEntries[] = {
    GPUMEMPROF_ENTRY(cuGetProcAddress, "cuGetProcAddress", 11030, false),
    GPUMEMPROF_ENTRY(cuGetProcAddress_v2, "cuGetProcAddress", 12000, false),
    GPUMEMPROF_ENTRY(cuMemAlloc_v2, "cuMemAlloc", 3020, false),
    GPUMEMPROF_ENTRY(cuMemFree_v2, "cuMemFree", 3020, false),
    GPUMEMPROF_ENTRY(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, false),
    GPUMEMPROF_ENTRY(cuMemGetInfo_v2, "cuMemGetInfo", 3020, false),
    GPUMEMPROF_ENTRY(cuMemAllocManaged, "cuMemAllocManaged", 6000, false),
    GPUMEMPROF_ENTRY(cuMemAllocHost_v2, "cuMemAllocHost", 3020, false),
    GPUMEMPROF_ENTRY(cuMemHostAlloc, "cuMemHostAlloc", 2020, false),
    GPUMEMPROF_ENTRY(cuMemFreeHost, "cuMemFreeHost", 2000, false),
    GPUMEMPROF_ENTRY(cuMemAllocAsync, "cuMemAllocAsync", 11020, false),
    GPUMEMPROF_ENTRY(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, true),
    GPUMEMPROF_ENTRY(cuMemFreeAsync, "cuMemFreeAsync", 11020, false),
    GPUMEMPROF_ENTRY(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, true),
    GPUMEMPROF_ENTRY(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, false),
    GPUMEMPROF_ENTRY(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, true),
    GPUMEMPROF_ENTRY(cuMemCreate, "cuMemCreate", 10020, false),
    GPUMEMPROF_ENTRY(cuMemRelease, "cuMemRelease", 10020, false),
    GPUMEMPROF_ENTRY(cuMemMap, "cuMemMap", 10020, false),
    GPUMEMPROF_ENTRY(cuMemUnmap, "cuMemUnmap", 10020, false),
    GPUMEMPROF_ENTRY(cuIpcGetMemHandle, "cuIpcGetMemHandle", 4010, false),
    GPUMEMPROF_ENTRY(cuStreamCreate, "cuStreamCreate", 2000, false),
    GPUMEMPROF_ENTRY(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, false),
    GPUMEMPROF_ENTRY(cuStreamDestroy_v2, "cuStreamDestroy", 4000, false),
    GPUMEMPROF_ENTRY(cuStreamBeginCapture, "cuStreamBeginCapture", 10000, false),
    GPUMEMPROF_ENTRY(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture", 10000, true),
    GPUMEMPROF_ENTRY(cuStreamBeginCapture_v2, "cuStreamBeginCapture", 10010, false),
    GPUMEMPROF_ENTRY(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture", 10010, true),
    GPUMEMPROF_ENTRY(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", 12030, false),
    GPUMEMPROF_ENTRY(cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph", 12030, true),
    GPUMEMPROF_ENTRY(cuStreamEndCapture, "cuStreamEndCapture", 10000, false),
    GPUMEMPROF_ENTRY(cuStreamEndCapture_ptsz, "cuStreamEndCapture", 10000, true),
    GPUMEMPROF_ENTRY(cuCtxSynchronize, "cuCtxSynchronize", 2000, false),
    GPUMEMPROF_ENTRY(cuCtxSynchronize_v2, "cuCtxSynchronize", 13000, false),
    GPUMEMPROF_ENTRY(cuCtxDestroy_v2, "cuCtxDestroy", 4000, false),
    GPUMEMPROF_ENTRY(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, false),
    GPUMEMPROF_ENTRY(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, false),
};

} // namespace

void* wrapper_for_name(const core::DriverApi& api, std::string_view name, const void* real) noexcept {
    if (!real)
        return nullptr;
    for (const Entry& e : kEntries)
        if (name == e.name)
            return e.real(api) == real ? e.wrapper : nullptr;
    return nullptr;
}

void* wrapper_for_real(const core::DriverApi& api, std::string_view base, const void* real) noexcept {
    if (!real)
        return nullptr;
    for (const Entry& e : kEntries)
        if (base == e.base && e.real(api) == real)
            return e.wrapper;
    return nullptr;
}

void* wrapper_for_request(std::string_view base, int version, unsigned long long flags) noexcept {
    if (version > CUDA_VERSION)
        return nullptr;
    bool want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const Entry* best = nullptr;
    bool has_ptsz = false;
    for (const Entry& e : kEntries)
        if (base == e.base && e.ptsz)
            has_ptsz = true;
    for (const Entry& e : kEntries) {
        if (base != e.base || e.abi > version || (has_ptsz && e.ptsz != want_ptsz))
            continue;
        if (!best || e.abi > best->abi)
            best = &e;
    }
    return best ? best->wrapper : nullptr;
}

} // namespace gpumemprof::intercept
