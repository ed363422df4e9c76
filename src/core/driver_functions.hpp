// SPDX-License-Identifier: MIT
// The one list of driver entry points we touch, each named once by its exported (versioned)
// spelling; cuda.h gives its signature. Everything else is generated from it:
//   core::DriverApi (driver_api.hpp)     a typed pointer to the real function, for every entry;
//   core::driver() (driver_api.cpp)      resolves each by exact name from libcuda.so.1;
//   the hook table (intercept/hook_table.cpp)  the HOOK entries, for the dlsym and
//                                        cuGetProcAddress doors.
// A HOOK entry is defined by us (intercept/driver_hooks.cpp, proc_address.cpp): the library does
// not link without it, the symbols test fails on an exported driver name missing here, and the
// preload case hook_doors asks every door for every HOOK at its ABI.
#pragma once

// HOOK(name, abi): we replace the exported `name` and call the real one. `abi` is the CUDA version
//   that introduced this ABI (cudaTypedefs.h's PFN_<base>_v<abi>), what cuGetProcAddress selects by;
//   the base name and the per-thread-stream flavour are read from `name` (hook_table.cpp).
// CALL(name): we only call it.
#define GPUMEMPROF_DRIVER_FUNCTIONS(HOOK, CALL)                                                                        \
    /* entry points (door c) */                                                                                        \
    HOOK(cuGetProcAddress, 11030)                                                                                      \
    HOOK(cuGetProcAddress_v2, 12000)                                                                                   \
    /* device memory, pinned host memory */                                                                            \
    HOOK(cuMemAlloc_v2, 3020)                                                                                          \
    HOOK(cuMemFree_v2, 3020)                                                                                           \
    HOOK(cuMemAllocPitch_v2, 3020)                                                                                     \
    HOOK(cuMemGetInfo_v2, 3020)                                                                                        \
    HOOK(cuMemAllocManaged, 6000)                                                                                      \
    HOOK(cuMemAllocHost_v2, 3020)                                                                                      \
    HOOK(cuMemHostAlloc, 2020)                                                                                         \
    HOOK(cuMemFreeHost, 2000)                                                                                          \
    HOOK(cuMemAllocAsync, 11020)                                                                                       \
    HOOK(cuMemAllocAsync_ptsz, 11020)                                                                                  \
    HOOK(cuMemFreeAsync, 11020)                                                                                        \
    HOOK(cuMemFreeAsync_ptsz, 11020)                                                                                   \
    HOOK(cuMemAllocFromPoolAsync, 11020)                                                                               \
    HOOK(cuMemAllocFromPoolAsync_ptsz, 11020)                                                                          \
    /* virtual memory management */                                                                                    \
    HOOK(cuMemCreate, 10020)                                                                                           \
    HOOK(cuMemRelease, 10020)                                                                                          \
    HOOK(cuMemMap, 10020)                                                                                              \
    HOOK(cuMemUnmap, 10020)                                                                                            \
    CALL(cuMemAddressReserve)                                                                                          \
    CALL(cuMemAddressFree)                                                                                             \
    CALL(cuMemSetAccess)                                                                                               \
    CALL(cuMemGetAllocationGranularity)                                                                                \
    HOOK(cuIpcGetMemHandle, 4010)                                                                                      \
    /* pointer queries: a pooled block answers as a plain allocation would */                                          \
    HOOK(cuMemGetAddressRange_v2, 3020)                                                                                \
    HOOK(cuPointerGetAttribute, 4000)                                                                                  \
    HOOK(cuPointerGetAttributes, 7000)                                                                                 \
    /* streams, captures, events */                                                                                    \
    HOOK(cuStreamCreate, 2000)                                                                                         \
    HOOK(cuStreamCreateWithPriority, 5050)                                                                             \
    HOOK(cuStreamDestroy_v2, 4000)                                                                                     \
    HOOK(cuStreamBeginCapture, 10000)                                                                                  \
    HOOK(cuStreamBeginCapture_ptsz, 10000)                                                                             \
    HOOK(cuStreamBeginCapture_v2, 10010)                                                                               \
    HOOK(cuStreamBeginCapture_v2_ptsz, 10010)                                                                          \
    HOOK(cuStreamBeginCaptureToGraph, 12030)                                                                           \
    HOOK(cuStreamBeginCaptureToGraph_ptsz, 12030)                                                                      \
    HOOK(cuStreamEndCapture, 10000)                                                                                    \
    HOOK(cuStreamEndCapture_ptsz, 10000)                                                                               \
    CALL(cuStreamIsCapturing)                                                                                          \
    CALL(cuStreamIsCapturing_ptsz)                                                                                     \
    CALL(cuStreamWaitEvent)                                                                                            \
    CALL(cuEventCreate)                                                                                                \
    CALL(cuEventRecord)                                                                                                \
    CALL(cuEventQuery)                                                                                                 \
    /* waits that may be where a program learns that a kernel faulted (Profiler::note_error) */                        \
    HOOK(cuStreamSynchronize, 2000)                                                                                    \
    HOOK(cuStreamSynchronize_ptsz, 7000)                                                                               \
    HOOK(cuEventSynchronize, 2000)                                                                                     \
    /* copies: where a program that reads its results back learns of a fault (Profiler::note_error) */                 \
    HOOK(cuMemcpy, 4000)                                                                                               \
    HOOK(cuMemcpy_ptds, 7000)                                                                                          \
    HOOK(cuMemcpyHtoD_v2, 3020)                                                                                        \
    HOOK(cuMemcpyHtoD_v2_ptds, 7000)                                                                                   \
    HOOK(cuMemcpyDtoH_v2, 3020)                                                                                        \
    HOOK(cuMemcpyDtoH_v2_ptds, 7000)                                                                                   \
    HOOK(cuMemcpyDtoD_v2, 3020)                                                                                        \
    HOOK(cuMemcpyDtoD_v2_ptds, 7000)                                                                                   \
    HOOK(cuMemcpyAsync, 4000)                                                                                          \
    HOOK(cuMemcpyAsync_ptsz, 7000)                                                                                     \
    HOOK(cuMemcpyHtoDAsync_v2, 3020)                                                                                   \
    HOOK(cuMemcpyHtoDAsync_v2_ptsz, 7000)                                                                              \
    HOOK(cuMemcpyDtoHAsync_v2, 3020)                                                                                   \
    HOOK(cuMemcpyDtoHAsync_v2_ptsz, 7000)                                                                              \
    HOOK(cuMemcpyDtoDAsync_v2, 3020)                                                                                   \
    HOOK(cuMemcpyDtoDAsync_v2_ptsz, 7000)                                                                              \
    /* memsets: a fault the driver has seen is answered here too (Profiler::note_error) */                             \
    HOOK(cuMemsetD8_v2, 3020)                                                                                          \
    HOOK(cuMemsetD8_v2_ptds, 7000)                                                                                     \
    HOOK(cuMemsetD8Async, 3020)                                                                                        \
    HOOK(cuMemsetD8Async_ptsz, 7000)                                                                                   \
    HOOK(cuMemsetD16_v2, 3020)                                                                                         \
    HOOK(cuMemsetD16_v2_ptds, 7000)                                                                                    \
    HOOK(cuMemsetD16Async, 3020)                                                                                       \
    HOOK(cuMemsetD16Async_ptsz, 7000)                                                                                  \
    HOOK(cuMemsetD32_v2, 3020)                                                                                         \
    HOOK(cuMemsetD32_v2_ptds, 7000)                                                                                    \
    HOOK(cuMemsetD32Async, 3020)                                                                                       \
    HOOK(cuMemsetD32Async_ptsz, 7000)                                                                                  \
    CALL(cuEventDestroy_v2)                                                                                            \
    /* what the driver takes for itself (core/driver_footprint.hpp) */                                                 \
    HOOK(cuModuleLoad, 2000)                                                                                           \
    HOOK(cuModuleLoadData, 2000)                                                                                       \
    HOOK(cuModuleLoadDataEx, 2010)                                                                                     \
    HOOK(cuModuleLoadFatBinary, 2000)                                                                                  \
    HOOK(cuModuleUnload, 2000)                                                                                         \
    HOOK(cuModuleGetFunction, 2000)                                                                                    \
    HOOK(cuLibraryLoadData, 12000)                                                                                     \
    HOOK(cuLibraryLoadFromFile, 12000)                                                                                 \
    HOOK(cuLibraryUnload, 12000)                                                                                       \
    HOOK(cuLibraryGetKernel, 12000)                                                                                    \
    HOOK(cuLibraryGetModule, 12000)                                                                                    \
    HOOK(cuKernelGetFunction, 12000)                                                                                   \
    HOOK(cuLaunchKernel, 4000)                                                                                         \
    HOOK(cuLaunchKernel_ptsz, 7000)                                                                                    \
    HOOK(cuLaunchKernelEx, 11060)                                                                                      \
    HOOK(cuLaunchKernelEx_ptsz, 11060)                                                                                 \
    HOOK(cuLaunchCooperativeKernel, 9000)                                                                              \
    HOOK(cuLaunchCooperativeKernel_ptsz, 9000)                                                                         \
    HOOK(cuGraphInstantiateWithFlags, 11040)                                                                           \
    HOOK(cuGraphInstantiateWithParams, 12000)                                                                          \
    HOOK(cuGraphInstantiateWithParams_ptsz, 12000)                                                                     \
    HOOK(cuGraphUpload, 11010)                                                                                         \
    HOOK(cuGraphUpload_ptsz, 11010)                                                                                    \
    HOOK(cuGraphLaunch, 10000)                                                                                         \
    HOOK(cuGraphLaunch_ptsz, 10000)                                                                                    \
    HOOK(cuGraphExecDestroy, 10000)                                                                                    \
    HOOK(cuDeviceGraphMemTrim, 11040)                                                                                  \
    HOOK(cuCtxSetLimit, 3010)                                                                                          \
    /* contexts and devices */                                                                                         \
    HOOK(cuCtxSynchronize, 2000)                                                                                       \
    HOOK(cuCtxSynchronize_v2, 13000)                                                                                   \
    HOOK(cuCtxCreate_v2, 3020)                                                                                         \
    HOOK(cuCtxCreate_v3, 11040)                                                                                        \
    HOOK(cuCtxCreate_v4, 12050)                                                                                        \
    HOOK(cuCtxDestroy_v2, 4000)                                                                                        \
    HOOK(cuDevicePrimaryCtxRelease_v2, 11000)                                                                          \
    HOOK(cuDevicePrimaryCtxReset_v2, 11000)                                                                            \
    CALL(cuCtxGetCurrent)                                                                                              \
    CALL(cuCtxGetDevice)                                                                                               \
    CALL(cuDeviceGetMemPool)                                                                                           \
    CALL(cuDeviceGetDefaultMemPool)                                                                                    \
    CALL(cuMemPoolGetAttribute)                                                                                        \
    CALL(cuCtxPushCurrent_v2)                                                                                          \
    CALL(cuCtxPopCurrent_v2)                                                                                           \
    CALL(cuDevicePrimaryCtxGetState)                                                                                   \
    CALL(cuDevicePrimaryCtxRetain)                                                                                     \
    CALL(cuDeviceTotalMem_v2)
