// SPDX-License-Identifier: MIT
// Simulated driver: cuGetProcAddress (4-argument, ABI 11030) and cuGetProcAddress_v2 (12000).
#include "sim_driver.hpp"

#include <cudaTypedefs.h>

#include <cstring>

namespace gpumemprof::sim {

namespace {

struct KnownAbi {
    const char* base;
    int version;
    int per_thread; // 1: the _ptsz/_ptds variant
};

/// Every ABI the toolkit headers know (generated from the PFN typedefs of cudaTypedefs.h).
constexpr KnownAbi kKnown[] = {
#include "sim_proc_versions.inc"
};

struct Impl {
    const char* base;
    int version;
    int per_thread;
    void* fn;
};

// The static_cast to the PFN typedef of exactly that version makes the compiler check that the
// function handed out for (base, version) has the ABI the caller will cast it to.
#define SIM_ABI(base, ver, fn)                                                                                         \
    { #base, ver, 0, reinterpret_cast < void*>(static_cast <PFN_##base##_v##ver>(&fn)) }
#define SIM_ABI_PT(base, ver, sfx, fn)                                                                                 \
    { #base, ver, 1, reinterpret_cast < void*>(static_cast <PFN_##base##_v##ver##_##sfx>(&fn)) }

const Impl kImpl[] = {
    SIM_ABI(cuInit, 2000, cuInit),
    SIM_ABI(cuDriverGetVersion, 2020, cuDriverGetVersion),
    SIM_ABI(cuDeviceGet, 2000, cuDeviceGet),
    SIM_ABI(cuDeviceGetCount, 2000, cuDeviceGetCount),
    SIM_ABI(cuDeviceGetName, 2000, cuDeviceGetName),
    SIM_ABI(cuDeviceTotalMem, 2000, cuDeviceTotalMem),
    SIM_ABI(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
    SIM_ABI(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    SIM_ABI(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    SIM_ABI(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    SIM_ABI(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    SIM_ABI(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    SIM_ABI(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    SIM_ABI(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
    SIM_ABI(cuCtxCreate, 2000, cuCtxCreate),
    SIM_ABI(cuCtxCreate, 3020, cuCtxCreate_v2),
    SIM_ABI(cuCtxCreate, 11040, cuCtxCreate_v3),
    SIM_ABI(cuCtxCreate, 12050, cuCtxCreate_v4),
    SIM_ABI(cuCtxDestroy, 2000, cuCtxDestroy),
    SIM_ABI(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    SIM_ABI(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    SIM_ABI(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    SIM_ABI(cuCtxPushCurrent, 2000, cuCtxPushCurrent),
    SIM_ABI(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    SIM_ABI(cuCtxPopCurrent, 2000, cuCtxPopCurrent),
    SIM_ABI(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    SIM_ABI(cuCtxGetDevice, 2000, cuCtxGetDevice),
    SIM_ABI(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
    SIM_ABI(cuCtxSynchronize, 2000, cuCtxSynchronize),
    SIM_ABI(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    SIM_ABI(cuMemAlloc, 2000, cuMemAlloc),
    SIM_ABI(cuMemAlloc, 3020, cuMemAlloc_v2),
    SIM_ABI(cuMemFree, 2000, cuMemFree),
    SIM_ABI(cuMemFree, 3020, cuMemFree_v2),
    SIM_ABI(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    SIM_ABI(cuMemGetInfo, 2000, cuMemGetInfo),
    SIM_ABI(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    SIM_ABI(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
    SIM_ABI(cuMemAllocManaged, 6000, cuMemAllocManaged),
    SIM_ABI(cuMemAllocHost, 2000, cuMemAllocHost),
    SIM_ABI(cuMemAllocHost, 3020, cuMemAllocHost_v2),
    SIM_ABI(cuMemHostAlloc, 2020, cuMemHostAlloc),
    SIM_ABI(cuMemFreeHost, 2000, cuMemFreeHost),
    SIM_ABI(cuMemAllocAsync, 11020, cuMemAllocAsync),
    SIM_ABI_PT(cuMemAllocAsync, 11020, ptsz, cuMemAllocAsync_ptsz),
    SIM_ABI(cuMemFreeAsync, 11020, cuMemFreeAsync),
    SIM_ABI_PT(cuMemFreeAsync, 11020, ptsz, cuMemFreeAsync_ptsz),
    SIM_ABI(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync),
    SIM_ABI_PT(cuMemAllocFromPoolAsync, 11020, ptsz, cuMemAllocFromPoolAsync_ptsz),
    SIM_ABI(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
    SIM_ABI(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
    SIM_ABI(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute),
    SIM_ABI(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute),
    SIM_ABI(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo),
    SIM_ABI(cuMemcpyHtoD, 2000, cuMemcpyHtoD),
    SIM_ABI(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2),
    SIM_ABI_PT(cuMemcpyHtoD, 7000, ptds, cuMemcpyHtoD_v2_ptds),
    SIM_ABI(cuMemcpyDtoH, 2000, cuMemcpyDtoH),
    SIM_ABI(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2),
    SIM_ABI_PT(cuMemcpyDtoH, 7000, ptds, cuMemcpyDtoH_v2_ptds),
    SIM_ABI(cuMemcpyDtoD, 2000, cuMemcpyDtoD),
    SIM_ABI(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2),
    SIM_ABI_PT(cuMemcpyDtoD, 7000, ptds, cuMemcpyDtoD_v2_ptds),
    SIM_ABI(cuMemcpy, 4000, cuMemcpy),
    SIM_ABI_PT(cuMemcpy, 7000, ptds, cuMemcpy_ptds),
    SIM_ABI(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2),
    SIM_ABI_PT(cuMemcpyHtoDAsync, 7000, ptsz, cuMemcpyHtoDAsync_v2_ptsz),
    SIM_ABI(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2),
    SIM_ABI_PT(cuMemcpyDtoHAsync, 7000, ptsz, cuMemcpyDtoHAsync_v2_ptsz),
    SIM_ABI(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2),
    SIM_ABI_PT(cuMemcpyDtoDAsync, 7000, ptsz, cuMemcpyDtoDAsync_v2_ptsz),
    SIM_ABI(cuMemcpyAsync, 4000, cuMemcpyAsync),
    SIM_ABI_PT(cuMemcpyAsync, 7000, ptsz, cuMemcpyAsync_ptsz),
    SIM_ABI(cuMemsetD8, 2000, cuMemsetD8),
    SIM_ABI(cuMemsetD8, 3020, cuMemsetD8_v2),
    SIM_ABI_PT(cuMemsetD8, 7000, ptds, cuMemsetD8_v2_ptds),
    SIM_ABI(cuMemsetD8Async, 3020, cuMemsetD8Async),
    SIM_ABI_PT(cuMemsetD8Async, 7000, ptsz, cuMemsetD8Async_ptsz),
    SIM_ABI(cuMemsetD16, 3020, cuMemsetD16_v2),
    SIM_ABI_PT(cuMemsetD16, 7000, ptds, cuMemsetD16_v2_ptds),
    SIM_ABI(cuMemsetD16Async, 3020, cuMemsetD16Async),
    SIM_ABI_PT(cuMemsetD16Async, 7000, ptsz, cuMemsetD16Async_ptsz),
    SIM_ABI(cuMemsetD32, 3020, cuMemsetD32_v2),
    SIM_ABI_PT(cuMemsetD32, 7000, ptds, cuMemsetD32_v2_ptds),
    SIM_ABI(cuMemsetD32Async, 3020, cuMemsetD32Async),
    SIM_ABI_PT(cuMemsetD32Async, 7000, ptsz, cuMemsetD32Async_ptsz),
    SIM_ABI(cuMemAddressReserve, 10020, cuMemAddressReserve),
    SIM_ABI(cuMemAddressFree, 10020, cuMemAddressFree),
    SIM_ABI(cuMemCreate, 10020, cuMemCreate),
    SIM_ABI(cuMemRelease, 10020, cuMemRelease),
    SIM_ABI(cuMemMap, 10020, cuMemMap),
    SIM_ABI(cuMemUnmap, 10020, cuMemUnmap),
    SIM_ABI(cuMemSetAccess, 10020, cuMemSetAccess),
    SIM_ABI(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    SIM_ABI(cuStreamCreate, 2000, cuStreamCreate),
    SIM_ABI(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    SIM_ABI(cuStreamDestroy, 2000, cuStreamDestroy),
    SIM_ABI(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    SIM_ABI(cuStreamSynchronize, 2000, cuStreamSynchronize),
    SIM_ABI_PT(cuStreamSynchronize, 7000, ptsz, cuStreamSynchronize_ptsz),
    SIM_ABI(cuStreamQuery, 2000, cuStreamQuery),
    SIM_ABI_PT(cuStreamQuery, 7000, ptsz, cuStreamQuery_ptsz),
    SIM_ABI(cuStreamWaitEvent, 3020, cuStreamWaitEvent),
    SIM_ABI_PT(cuStreamWaitEvent, 7000, ptsz, cuStreamWaitEvent_ptsz),
    SIM_ABI(cuStreamBeginCapture, 10000, cuStreamBeginCapture),
    SIM_ABI_PT(cuStreamBeginCapture, 10000, ptsz, cuStreamBeginCapture_ptsz),
    SIM_ABI(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2),
    SIM_ABI_PT(cuStreamBeginCapture, 10010, ptsz, cuStreamBeginCapture_v2_ptsz),
    SIM_ABI(cuStreamBeginCaptureToGraph, 12030, cuStreamBeginCaptureToGraph),
    SIM_ABI_PT(cuStreamBeginCaptureToGraph, 12030, ptsz, cuStreamBeginCaptureToGraph_ptsz),
    SIM_ABI(cuStreamEndCapture, 10000, cuStreamEndCapture),
    SIM_ABI_PT(cuStreamEndCapture, 10000, ptsz, cuStreamEndCapture_ptsz),
    SIM_ABI(cuStreamIsCapturing, 10000, cuStreamIsCapturing),
    SIM_ABI(cuGraphDestroy, 10000, cuGraphDestroy),
    SIM_ABI_PT(cuStreamIsCapturing, 10000, ptsz, cuStreamIsCapturing_ptsz),
    SIM_ABI(cuEventCreate, 2000, cuEventCreate),
    SIM_ABI(cuEventRecord, 2000, cuEventRecord),
    SIM_ABI_PT(cuEventRecord, 7000, ptsz, cuEventRecord_ptsz),
    SIM_ABI(cuEventQuery, 2000, cuEventQuery),
    SIM_ABI(cuEventSynchronize, 2000, cuEventSynchronize),
    SIM_ABI(cuEventDestroy, 2000, cuEventDestroy),
    SIM_ABI(cuEventDestroy, 4000, cuEventDestroy_v2),
    SIM_ABI(cuLaunchHostFunc, 10000, cuLaunchHostFunc),
    SIM_ABI_PT(cuLaunchHostFunc, 10000, ptsz, cuLaunchHostFunc_ptsz),
    SIM_ABI(cuIpcGetMemHandle, 4010, cuIpcGetMemHandle),
    SIM_ABI(cuPointerGetAttribute, 4000, cuPointerGetAttribute),
    SIM_ABI(cuPointerGetAttributes, 7000, cuPointerGetAttributes),
    SIM_ABI(cuModuleLoad, 2000, cuModuleLoad),
    SIM_ABI(cuModuleLoadData, 2000, cuModuleLoadData),
    SIM_ABI(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
    SIM_ABI(cuModuleLoadFatBinary, 2000, cuModuleLoadFatBinary),
    SIM_ABI(cuModuleUnload, 2000, cuModuleUnload),
    SIM_ABI(cuModuleGetFunction, 2000, cuModuleGetFunction),
    SIM_ABI(cuLibraryLoadData, 12000, cuLibraryLoadData),
    SIM_ABI(cuLibraryLoadFromFile, 12000, cuLibraryLoadFromFile),
    SIM_ABI(cuLibraryUnload, 12000, cuLibraryUnload),
    SIM_ABI(cuLibraryGetKernel, 12000, cuLibraryGetKernel),
    SIM_ABI(cuLibraryGetModule, 12000, cuLibraryGetModule),
    SIM_ABI(cuKernelGetFunction, 12000, cuKernelGetFunction),
    SIM_ABI(cuLaunchKernel, 4000, cuLaunchKernel),
    SIM_ABI_PT(cuLaunchKernel, 7000, ptsz, cuLaunchKernel_ptsz),
    SIM_ABI(cuLaunchKernelEx, 11060, cuLaunchKernelEx),
    SIM_ABI_PT(cuLaunchKernelEx, 11060, ptsz, cuLaunchKernelEx_ptsz),
    SIM_ABI(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel),
    SIM_ABI_PT(cuLaunchCooperativeKernel, 9000, ptsz, cuLaunchCooperativeKernel_ptsz),
    SIM_ABI(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    SIM_ABI(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams),
    SIM_ABI_PT(cuGraphInstantiateWithParams, 12000, ptsz, cuGraphInstantiateWithParams_ptsz),
    SIM_ABI(cuGraphUpload, 11010, cuGraphUpload),
    SIM_ABI_PT(cuGraphUpload, 11010, ptsz, cuGraphUpload_ptsz),
    SIM_ABI(cuGraphLaunch, 10000, cuGraphLaunch),
    SIM_ABI_PT(cuGraphLaunch, 10000, ptsz, cuGraphLaunch_ptsz),
    SIM_ABI(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
    SIM_ABI(cuDeviceGraphMemTrim, 11040, cuDeviceGraphMemTrim),
    SIM_ABI(cuCtxSetLimit, 3010, cuCtxSetLimit),
    SIM_ABI(cuGetErrorString, 6000, cuGetErrorString),
    SIM_ABI(cuGetErrorName, 6000, cuGetErrorName),
    SIM_ABI(cuGetExportTable, 3000, cuGetExportTable),
    SIM_ABI(cuGetProcAddress, 11030, cuGetProcAddress),
    SIM_ABI(cuGetProcAddress, 12000, cuGetProcAddress_v2),
};

#undef SIM_ABI
#undef SIM_ABI_PT

/// The real contract (cuda.h cuGetProcAddress): pick the newest ABI whose version is <= cudaVersion;
/// with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM prefer the per-thread variant and fall back
/// to the legacy one when no per-thread ABI qualifies; unknown symbol or no qualifying ABI:
/// CUDA_SUCCESS, *pfn = NULL and the reason in symbolStatus; cudaVersion above the driver's:
/// CUDA_ERROR_INVALID_VALUE.
CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = nullptr;
    if (version > kDriverVersion || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    bool known = false;
    const KnownAbi* best[2] = {nullptr, nullptr}; // [legacy, per-thread]
    for (const KnownAbi& k : kKnown) {
        if (std::strcmp(k.base, symbol) != 0)
            continue;
        known = true;
        if (k.version > version)
            continue;
        const KnownAbi*& b = best[k.per_thread];
        if (!b || k.version > b->version)
            b = &k;
    }
    const KnownAbi* pick = best[0];
    if (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && best[1])
        pick = best[1];
    if (!pick) {
        if (status)
            *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_SUCCESS;
    }
    for (const Impl& i : kImpl) {
        if (i.version == pick->version && i.per_thread == pick->per_thread && std::strcmp(i.base, symbol) == 0) {
            *pfn = i.fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    // An ABI the simulation does not implement: answer like a driver without the function rather
    // than hand out an older, incompatible one.
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

} // namespace

} // namespace gpumemprof::sim

using namespace gpumemprof::sim;

SIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* symbolStatus) {
    if (CUresult fault = count_call("cuGetProcAddress_v2"))
        return fault;
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

SIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
    if (CUresult fault = count_call("cuGetProcAddress"))
        return fault;
    return lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

/// Test hook: the number of (base, version) pairs the simulation implements that the headers do
/// not know (must be 0), so a typo in the table above cannot hide.
SIM_EXPORT int simcuda_unknown_abis() {
    int n = 0;
    for (const Impl& i : kImpl) {
        bool found = false;
        for (const KnownAbi& k : kKnown) {
            found |= k.version == i.version && k.per_thread == i.per_thread && std::strcmp(k.base, i.base) == 0;
        }
        n += !found;
    }
    return n;
}
