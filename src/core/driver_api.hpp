// SPDX-License-Identifier: MIT
// The real driver's entry points, fetched by exact name from the real libcuda.so.1 (never through
// our own hooks, never linked). Typed from cuda.h's own prototypes so every call is checked.
#pragma once

#include "core/cuda_api.hpp"

#include <atomic>

namespace gpumemprof::core {

// X(name): a driver function we call or forward to. The name is the exported, versioned spelling.
#define GPUMEMPROF_REAL_FUNCTIONS(X) \
    X(cuGetProcAddress) X(cuGetProcAddress_v2) \
    X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) \
    X(cuCtxSynchronize) X(cuCtxSynchronize_v2) \
    X(cuCtxDestroy_v2) X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) X(cuDeviceTotalMem_v2) \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocPitch_v2) X(cuMemGetInfo_v2) \
    X(cuMemAllocManaged) X(cuMemAllocHost_v2) X(cuMemHostAlloc) X(cuMemFreeHost) \
    X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) \
    X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemSetAccess) X(cuMemGetAllocationGranularity) \
    X(cuIpcGetMemHandle) \
    X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) X(cuEventDestroy_v2) \
    X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2) X(cuStreamWaitEvent) \
    X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz) \
    X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz) X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz) \
    X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz) \
    X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)

struct DriverApi {
#define GPUMEMPROF_DECLARE_REAL(name) decltype(&::name) name = nullptr;
    GPUMEMPROF_REAL_FUNCTIONS(GPUMEMPROF_DECLARE_REAL)
#undef GPUMEMPROF_DECLARE_REAL
    void* handle = nullptr;        ///< dlopen handle of libcuda.so.1
    const void* base = nullptr;    ///< load address of libcuda.so.1 (dladdr)
};

/// The table, resolved on first use from any thread; never blocks on another thread (racing
/// resolvers write the same values). Returns nullptr when libcuda.so.1 cannot be loaded.
/// `load` = false only looks for an already loaded libcuda (RTLD_NOLOAD).
const DriverApi* driver(bool load = true) noexcept;

/// glibc's dlsym, found without going through our own exported `dlsym` hook.
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym() noexcept;

} // namespace gpumemprof::core
