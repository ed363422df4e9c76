// SPDX-License-Identifier: MIT
// Door (a): the driver's exported names. Each hook finds the real function and makes one call into
// the core; the same functions are what the dlsym and cuGetProcAddress doors hand out. Each is
// listed once, as a HOOK of core/driver_functions.hpp.
#include "core/caller_modules.hpp"
#include "core/core_scope.hpp"
#include "core/driver_api.hpp"
#include "core/profiler.hpp"

#include "core/cuda_api.hpp"

using gpumemprof::core::DriverApi;
using gpumemprof::core::Profiler;

namespace {

// The real function of this hook, or the error a program gets when the driver lacks it.
// CoreScope: no cancellation point and no fatal-signal report while this thread is in the core.
#define GPUMEMPROF_REAL_OR_RETURN(api, fn)                                                                             \
    gpumemprof::core::CoreScope core_scope_;                                                                           \
    const DriverApi* api = gpumemprof::core::driver();                                                                 \
    if (!api)                                                                                                          \
        return CUDA_ERROR_NOT_INITIALIZED;                                                                             \
    if (!api->fn)                                                                                                      \
        return CUDA_ERROR_NOT_FOUND;

Profiler& prof() {
    return Profiler::instance();
}

// The program's call that reached this hook (directly, or through the runtime door).
#define GPUMEMPROF_CALLER gpumemprof::core::entry_caller(reinterpret_cast<std::uintptr_t>(__builtin_return_address(0)))

} // namespace

extern "C" {

// ---- pooled ------------------------------------------------------------------------------------
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAlloc_v2);
    return prof().mem_alloc(*api, dptr, bytesize, GPUMEMPROF_CALLER);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned elem) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocPitch_v2);
    return prof().mem_alloc_pitch(*api, dptr, pitch, width, height, elem, GPUMEMPROF_CALLER);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemFree_v2);
    return prof().mem_free(*api, dptr);
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemGetInfo_v2);
    return prof().mem_get_info(*api, free, total);
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuIpcGetMemHandle);
    return prof().ipc_get_mem_handle(*api, handle, dptr);
}

// ---- pointer queries ---------------------------------------------------------------------------
CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemGetAddressRange_v2);
    return prof().address_range(*api, pbase, psize, dptr);
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuPointerGetAttribute);
    return prof().pointer_attribute(*api, data, attribute, ptr);
}

CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuPointerGetAttributes);
    return prof().pointer_attributes(*api, count, attributes, data, ptr);
}

// ---- passed through, recorded ------------------------------------------------------------------
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocManaged);
    return prof().managed_alloc(*api, dptr, bytesize, flags);
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocHost_v2);
    return prof().host_alloc(*api, pp, bytesize, 0, false);
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemHostAlloc);
    return prof().host_alloc(*api, pp, bytesize, flags, true);
}

CUresult cuMemFreeHost(void* p) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemFreeHost);
    return prof().host_free(*api, p);
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocAsync);
    return prof().async_alloc(*api, dptr, bytesize, nullptr, s, false, false);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocAsync_ptsz);
    return prof().async_alloc(*api, dptr, bytesize, nullptr, s, false, true);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocFromPoolAsync);
    return prof().async_alloc(*api, dptr, bytesize, pool, s, true, false);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocFromPoolAsync_ptsz);
    return prof().async_alloc(*api, dptr, bytesize, pool, s, true, true);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemFreeAsync);
    return prof().mem_free_async(*api, dptr, s, false);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemFreeAsync_ptsz);
    return prof().mem_free_async(*api, dptr, s, true);
}

// ---- virtual memory management -----------------------------------------------------------------
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemCreate);
    return prof().vmm_create(*api, handle, size, prop, flags, GPUMEMPROF_CALLER);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemRelease);
    return prof().vmm_release(*api, handle);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemMap);
    return prof().vmm_map(*api, ptr, size, offset, handle, flags, GPUMEMPROF_CALLER);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemUnmap);
    return prof().vmm_unmap(*api, ptr, size);
}

// ---- streams and captures: what a fence must cover -----------------------------------------------
CUresult cuStreamCreate(CUstream* phStream, unsigned int flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamCreate);
    return prof().stream_created(*api, api->cuStreamCreate(phStream, flags), phStream, flags);
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamCreateWithPriority);
    return prof().stream_created(*api, api->cuStreamCreateWithPriority(phStream, flags, priority), phStream, flags);
}

CUresult cuStreamDestroy_v2(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamDestroy_v2);
    return prof().stream_destroy(*api, s);
}

CUresult cuStreamBeginCapture(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture);
    return prof().streams().capture_begun(api->cuStreamBeginCapture(s));
}

CUresult cuStreamBeginCapture_ptsz(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_ptsz);
    return prof().streams().capture_begun(api->cuStreamBeginCapture_ptsz(s));
}

CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_v2);
    return prof().streams().capture_begun(api->cuStreamBeginCapture_v2(s, mode));
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_v2_ptsz);
    return prof().streams().capture_begun(api->cuStreamBeginCapture_v2_ptsz(s, mode));
}

CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* data,
                                     size_t n, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCaptureToGraph);
    return prof().streams().capture_begun(api->cuStreamBeginCaptureToGraph(s, g, deps, data, n, mode));
}

CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* data,
                                          size_t n, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCaptureToGraph_ptsz);
    return prof().streams().capture_begun(api->cuStreamBeginCaptureToGraph_ptsz(s, g, deps, data, n, mode));
}

CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamEndCapture);
    return prof().streams().end_capture(*api, s, false, [&] { return api->cuStreamEndCapture(s, g); });
}

CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamEndCapture_ptsz);
    return prof().streams().end_capture(*api, s, true, [&] { return api->cuStreamEndCapture_ptsz(s, g); });
}

// ---- device-wide synchronization: every block freed before it is free --------------------------
CUresult cuCtxSynchronize() {
    GPUMEMPROF_REAL_OR_RETURN(api, cuCtxSynchronize);
    return prof().ctx_synchronize(*api, nullptr, [&] { return api->cuCtxSynchronize(); });
}

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuCtxSynchronize_v2);
    return prof().ctx_synchronize(*api, ctx, [&] { return api->cuCtxSynchronize_v2(ctx); });
}

// ---- context lifetime: a pool must never outlive its context ------------------------------------
CUresult cuCtxDestroy_v2(CUcontext ctx) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuCtxDestroy_v2);
    return prof().ctx_destroy(*api, ctx);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuDevicePrimaryCtxReset_v2);
    return prof().primary_reset(*api, dev);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuDevicePrimaryCtxRelease_v2);
    return prof().primary_release(*api, dev);
}

} // extern "C"
