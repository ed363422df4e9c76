// SPDX-License-Identifier: MIT
// Door (a): the driver's exported names. Each hook is a thin forwarder into the core; the same
// functions are what the dlsym and cuGetProcAddress doors hand out. Each is listed once, as a HOOK
// of core/driver_functions.hpp.
#include "core/caller_modules.hpp"
#include "core/driver_api.hpp"
#include "core/profiler.hpp"
#include "core/core_scope.hpp"

#include "core/cuda_api.hpp"

using gpumemprof::core::DriverApi;
using gpumemprof::core::kDeviceOfCurrentContext;
using gpumemprof::core::kHostMemory;
using gpumemprof::core::Kind;
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

CUresult stream_is_capturing(const DriverApi& api, CUstream s, bool ptsz) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    auto fn = ptsz ? api.cuStreamIsCapturing_ptsz : api.cuStreamIsCapturing;
    if (!fn || fn(s, &st) != CUDA_SUCCESS)
        return CUDA_ERROR_UNKNOWN;
    return st == CU_STREAM_CAPTURE_STATUS_NONE ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult end_capture(const DriverApi& api, CUstream s, CUgraph* g, bool ptsz) {
    bool was = stream_is_capturing(api, s, ptsz) == CUDA_SUCCESS;
    CUresult r = (ptsz ? api.cuStreamEndCapture_ptsz : api.cuStreamEndCapture)(s, g);
    if (was && stream_is_capturing(api, s, ptsz) != CUDA_SUCCESS) {
        int c = prof().streams().captures.load();
        while (c > 0 && !prof().streams().captures.compare_exchange_weak(c, c - 1)) {
        }
    }
    return r;
}

// A created stream that runs independently of the legacy stream must get its own fence events.
// A stream the program creates ends reuse at once (work may now run in two orders); one that a
// joining library (cuDNN) creates for itself does not (core/stream_origin.hpp). The new stream
// first waits for what the legacy stream has queued so far: blocks freed and reused at once
// before it existed may still be in use there (cudaFree would have waited for that work).
CUresult track_stream(const DriverApi& api, CUresult r, CUstream* stream, unsigned flags) {
    CUcontext ctx = nullptr;
    if (r != CUDA_SUCCESS || api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
        return r;
    const bool joins_caller = prof().note_stream_created();
    if (flags & CU_STREAM_NON_BLOCKING) {
        // A joining library's stream needs no fence of its own: its work is joined into a stream
        // of the program's before the library call returns, and that stream is fenced.
        if (!joins_caller)
            prof().streams().add(ctx, *stream);
        if (prof().streams().captures.load(std::memory_order_acquire) == 0 && api.cuStreamWaitEvent) {
            CUevent e = nullptr;
            if (api.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
                if (api.cuEventRecord(e, nullptr) == CUDA_SUCCESS)
                    api.cuStreamWaitEvent(*stream, e, 0);
                api.cuEventDestroy_v2(e);
            }
        }
    }
    return r;
}

// Pinned host memory: not device memory, but seen and reported as such (device -1).
template <typename Alloc> CUresult host_alloc(const DriverApi& api, void** pp, size_t bytes, Alloc&& alloc) {
    std::uint32_t stack = prof().capture_stack();
    CUresult r = alloc();
    if (r == CUDA_SUCCESS)
        prof().record_alloc_with_stack(Kind::host_pinned, api, reinterpret_cast<std::uintptr_t>(*pp), bytes,
                                       kHostMemory, stack);
    return r;
}

CUresult count_capture(CUresult r) {
    if (r == CUDA_SUCCESS)
        prof().streams().captures.fetch_add(1, std::memory_order_acq_rel);
    return r;
}

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
    std::uint32_t stack = prof().capture_stack();
    CUresult r = api->cuMemAllocManaged(dptr, bytesize, flags);
    if (r == CUDA_SUCCESS)
        prof().record_alloc_with_stack(Kind::managed, *api, *dptr, bytesize, kDeviceOfCurrentContext, stack);
    return r;
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocHost_v2);
    return host_alloc(*api, pp, bytesize, [&] { return api->cuMemAllocHost_v2(pp, bytesize); });
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemHostAlloc);
    return host_alloc(*api, pp, bytesize, [&] { return api->cuMemHostAlloc(pp, bytesize, flags); });
}

CUresult cuMemFreeHost(void* p) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemFreeHost);
    CUresult r = api->cuMemFreeHost(p);
    if (r == CUDA_SUCCESS)
        prof().record_free(Kind::host_pinned, reinterpret_cast<std::uintptr_t>(p));
    return r;
}

#define GPUMEMPROF_ASYNC_ALLOC(name, ...)                                                                              \
    {                                                                                                                  \
        GPUMEMPROF_REAL_OR_RETURN(api, name);                                                                          \
        std::uint32_t stack = prof().capture_stack();                                                                  \
        CUresult r = api->name(__VA_ARGS__);                                                                           \
        if (r == CUDA_SUCCESS)                                                                                         \
            prof().record_alloc_with_stack(Kind::async, *api, *dptr, bytesize, kDeviceOfCurrentContext, stack);        \
        return r;                                                                                                      \
    }

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream s)
    GPUMEMPROF_ASYNC_ALLOC(cuMemAllocAsync, dptr, bytesize, s) CUresult
    cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream s)
        GPUMEMPROF_ASYNC_ALLOC(cuMemAllocAsync_ptsz, dptr, bytesize, s) CUresult
    cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream s)
        GPUMEMPROF_ASYNC_ALLOC(cuMemAllocFromPoolAsync, dptr, bytesize, pool, s) CUresult
    cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream s)
        GPUMEMPROF_ASYNC_ALLOC(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, s)

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
    const bool torch = prof().torch_allocator_call(GPUMEMPROF_CALLER);
    CUresult r = api->cuMemCreate(handle, size, prop, flags);
    if (r == CUDA_SUCCESS) {
        // Threads creating VMM memory may have no current context (HAMi-core #169): the device
        // comes from the allocation's own location.
        int device = (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) ? prop->location.id : -1;
        if (torch)
            prof().torch_page_created(*api, static_cast<std::uintptr_t>(*handle), size, device);
        else
            prof().record_alloc(Kind::vmm_physical, *api, static_cast<std::uintptr_t>(*handle), size, device);
    }
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemRelease);
    CUresult r = api->cuMemRelease(handle);
    if (r == CUDA_SUCCESS) {
        prof().record_free(Kind::vmm_physical, static_cast<std::uintptr_t>(handle));
        prof().record_free(Kind::torch_physical, static_cast<std::uintptr_t>(handle));
    }
    return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemMap);
    if (prof().torch_allocator_call(GPUMEMPROF_CALLER)) // its pages: the mirror sees them mapped
        return api->cuMemMap(ptr, size, offset, handle, flags);
    std::uint32_t stack = prof().capture_stack();
    CUresult r = api->cuMemMap(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS) {
        int device = prof().ledger().handle_device(static_cast<std::uintptr_t>(handle));
        if (device >= 0)
            prof().record_alloc_with_stack(Kind::vmm_mapped, *api, static_cast<std::uintptr_t>(ptr), size, device,
                                           stack);
    }
    return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemUnmap);
    CUresult r = api->cuMemUnmap(ptr, size);
    if (r == CUDA_SUCCESS)
        prof().record_free(Kind::vmm_mapped, static_cast<std::uintptr_t>(ptr));
    return r;
}

// ---- streams and captures: what a fence must cover -----------------------------------------------
CUresult cuStreamCreate(CUstream* phStream, unsigned int flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamCreate);
    return track_stream(*api, api->cuStreamCreate(phStream, flags), phStream, flags);
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamCreateWithPriority);
    return track_stream(*api, api->cuStreamCreateWithPriority(phStream, flags, priority), phStream, flags);
}

CUresult cuStreamDestroy_v2(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamDestroy_v2);
    prof().streams().remove(*api, s);
    return api->cuStreamDestroy_v2(s);
}

CUresult cuStreamBeginCapture(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture);
    return count_capture(api->cuStreamBeginCapture(s));
}
CUresult cuStreamBeginCapture_ptsz(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_ptsz);
    return count_capture(api->cuStreamBeginCapture_ptsz(s));
}
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_v2);
    return count_capture(api->cuStreamBeginCapture_v2(s, mode));
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_v2_ptsz);
    return count_capture(api->cuStreamBeginCapture_v2_ptsz(s, mode));
}
CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* data,
                                     size_t n, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCaptureToGraph);
    return count_capture(api->cuStreamBeginCaptureToGraph(s, g, deps, data, n, mode));
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* data,
                                          size_t n, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCaptureToGraph_ptsz);
    return count_capture(api->cuStreamBeginCaptureToGraph_ptsz(s, g, deps, data, n, mode));
}
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamEndCapture);
    return end_capture(*api, s, g, false);
}
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamEndCapture_ptsz);
    return end_capture(*api, s, g, true);
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
    prof().drop_context(ctx);
    return api->cuCtxDestroy_v2(ctx);
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
