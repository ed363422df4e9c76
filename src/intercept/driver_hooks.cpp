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

// Keys of the handles whose first use is measured (core/driver_footprint.hpp); handles are
// aligned, so a tag in the low bits keeps the kinds apart.
std::uintptr_t handle_key(const void* h, std::uintptr_t tag = 0) {
    return reinterpret_cast<std::uintptr_t>(h) | tag;
}
gpumemprof::core::HandleUse first_kernel(const void* f) {
    return prof().footprint().first_use(handle_key(f));
}
gpumemprof::core::HandleUse first_graph_run(CUgraphExec g) {
    return prof().footprint().first_use(handle_key(g, 1));
}

// The program's call that reached this hook (directly, or through the runtime door).
#define GPUMEMPROF_CALLER gpumemprof::core::entry_caller(reinterpret_cast<std::uintptr_t>(__builtin_return_address(0)))

// A driver call whose own device memory is measured (core/driver_footprint.hpp) when `measure`
// (true, or a handle's use that says so).
#define GPUMEMPROF_FOOTPRINT(cause, measure, call)                                                                     \
    prof().driver_footprint(*api, gpumemprof::core::FootprintCause::cause, (measure), [&] { return api->call; })

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
    return prof().managed_alloc(*api, dptr, bytesize, flags, GPUMEMPROF_CALLER);
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
    return prof().async_alloc(*api, dptr, bytesize, nullptr, s, false, false, GPUMEMPROF_CALLER);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocAsync_ptsz);
    return prof().async_alloc(*api, dptr, bytesize, nullptr, s, false, true, GPUMEMPROF_CALLER);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocFromPoolAsync);
    return prof().async_alloc(*api, dptr, bytesize, pool, s, true, false, GPUMEMPROF_CALLER);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuMemAllocFromPoolAsync_ptsz);
    return prof().async_alloc(*api, dptr, bytesize, pool, s, true, true, GPUMEMPROF_CALLER);
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
    return prof().stream_created(
        *api, GPUMEMPROF_FOOTPRINT(streams, prof().footprint().stream_call_measured(), cuStreamCreate(phStream, flags)),
        phStream, flags);
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamCreateWithPriority);
    return prof().stream_created(*api,
                                 GPUMEMPROF_FOOTPRINT(streams, prof().footprint().stream_call_measured(),
                                                      cuStreamCreateWithPriority(phStream, flags, priority)),
                                 phStream, flags);
}

CUresult cuStreamDestroy_v2(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamDestroy_v2);
    return prof().driver_footprint(*api, gpumemprof::core::FootprintCause::streams,
                                   prof().footprint().stream_call_measured(),
                                   [&] { return prof().stream_destroy(*api, s); });
}

CUresult cuStreamBeginCapture(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture);
    return prof().capture_begin(*api, [&] { return api->cuStreamBeginCapture(s); });
}

CUresult cuStreamBeginCapture_ptsz(CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_ptsz);
    return prof().capture_begin(*api, [&] { return api->cuStreamBeginCapture_ptsz(s); });
}

CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_v2);
    return prof().capture_begin(*api, [&] { return api->cuStreamBeginCapture_v2(s, mode); });
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCapture_v2_ptsz);
    return prof().capture_begin(*api, [&] { return api->cuStreamBeginCapture_v2_ptsz(s, mode); });
}

CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* data,
                                     size_t n, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCaptureToGraph);
    return prof().capture_begin(*api, [&] { return api->cuStreamBeginCaptureToGraph(s, g, deps, data, n, mode); });
}

CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* data,
                                          size_t n, CUstreamCaptureMode mode) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamBeginCaptureToGraph_ptsz);
    return prof().capture_begin(*api, [&] { return api->cuStreamBeginCaptureToGraph_ptsz(s, g, deps, data, n, mode); });
}

CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamEndCapture);
    return prof().capture_end(*api, s, false, [&] { return api->cuStreamEndCapture(s, g); });
}

CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuStreamEndCapture_ptsz);
    return prof().capture_end(*api, s, true, [&] { return api->cuStreamEndCapture_ptsz(s, g); });
}

// ---- what the driver takes for itself: measured (core/driver_footprint.hpp) ---------------------
// Module loads and unloads, graph instantiation and destruction, and limits at every call; a
// kernel's launch or lookup, and a graph's first upload or launch, once per handle.

CUresult cuModuleLoad(CUmodule* module, const char* fname) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuModuleLoad);
    return GPUMEMPROF_FOOTPRINT(code, true, cuModuleLoad(module, fname));
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuModuleLoadData);
    return GPUMEMPROF_FOOTPRINT(code, true, cuModuleLoadData(module, image));
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int n, CUjit_option* options, void** values) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuModuleLoadDataEx);
    return GPUMEMPROF_FOOTPRINT(code, true, cuModuleLoadDataEx(module, image, n, options, values));
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuModuleLoadFatBinary);
    return GPUMEMPROF_FOOTPRINT(code, true, cuModuleLoadFatBinary(module, fat_cubin));
}

CUresult cuModuleUnload(CUmodule module) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuModuleUnload);
    return GPUMEMPROF_FOOTPRINT(code, true, cuModuleUnload(module));
}

CUresult cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuModuleGetFunction);
    return GPUMEMPROF_FOOTPRINT(code, prof().footprint().first_use(handle_key(module), name),
                                cuModuleGetFunction(f, module, name));
}

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit_options, void** jit_values,
                           unsigned int n_jit, CUlibraryOption* library_options, void** library_values,
                           unsigned int n_library) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLibraryLoadData);
    return GPUMEMPROF_FOOTPRINT(
        code, true,
        cuLibraryLoadData(library, code, jit_options, jit_values, n_jit, library_options, library_values, n_library));
}

CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* file, CUjit_option* jit_options, void** jit_values,
                               unsigned int n_jit, CUlibraryOption* library_options, void** library_values,
                               unsigned int n_library) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLibraryLoadFromFile);
    return GPUMEMPROF_FOOTPRINT(code, true,
                                cuLibraryLoadFromFile(library, file, jit_options, jit_values, n_jit, library_options,
                                                      library_values, n_library));
}

CUresult cuLibraryUnload(CUlibrary library) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLibraryUnload);
    return GPUMEMPROF_FOOTPRINT(code, true, cuLibraryUnload(library));
}

CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLibraryGetKernel);
    return GPUMEMPROF_FOOTPRINT(code, prof().footprint().first_use(handle_key(library), name),
                                cuLibraryGetKernel(kernel, library, name));
}

CUresult cuLibraryGetModule(CUmodule* module, CUlibrary library) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLibraryGetModule);
    return GPUMEMPROF_FOOTPRINT(code, prof().footprint().first_use(handle_key(library, 3)),
                                cuLibraryGetModule(module, library));
}

CUresult cuKernelGetFunction(CUfunction* f, CUkernel kernel) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuKernelGetFunction);
    return GPUMEMPROF_FOOTPRINT(code, prof().footprint().first_use(handle_key(kernel, 2)),
                                cuKernelGetFunction(f, kernel));
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void** params,
                        void** extra) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLaunchKernel);
    return GPUMEMPROF_FOOTPRINT(code, first_kernel(f),
                                cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void** params,
                             void** extra) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLaunchKernel_ptsz);
    return GPUMEMPROF_FOOTPRINT(code, first_kernel(f),
                                cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, s, params, extra));
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLaunchKernelEx);
    return GPUMEMPROF_FOOTPRINT(code, first_kernel(f), cuLaunchKernelEx(config, f, params, extra));
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLaunchKernelEx_ptsz);
    return GPUMEMPROF_FOOTPRINT(code, first_kernel(f), cuLaunchKernelEx_ptsz(config, f, params, extra));
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void** params) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLaunchCooperativeKernel);
    return GPUMEMPROF_FOOTPRINT(code, first_kernel(f),
                                cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, s, params));
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                        CUstream s, void** params) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuLaunchCooperativeKernel_ptsz);
    return GPUMEMPROF_FOOTPRINT(code, first_kernel(f),
                                cuLaunchCooperativeKernel_ptsz(f, gx, gy, gz, bx, by, bz, shared, s, params));
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphInstantiateWithFlags);
    return GPUMEMPROF_FOOTPRINT(graphs, true, cuGraphInstantiateWithFlags(exec, graph, flags));
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphInstantiateWithParams);
    return GPUMEMPROF_FOOTPRINT(graphs, true, cuGraphInstantiateWithParams(exec, graph, params));
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphInstantiateWithParams_ptsz);
    return GPUMEMPROF_FOOTPRINT(graphs, true, cuGraphInstantiateWithParams_ptsz(exec, graph, params));
}

CUresult cuGraphUpload(CUgraphExec exec, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphUpload);
    return GPUMEMPROF_FOOTPRINT(graphs, first_graph_run(exec), cuGraphUpload(exec, s));
}

CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphUpload_ptsz);
    return GPUMEMPROF_FOOTPRINT(graphs, first_graph_run(exec), cuGraphUpload_ptsz(exec, s));
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphLaunch);
    return GPUMEMPROF_FOOTPRINT(graphs, first_graph_run(exec), cuGraphLaunch(exec, s));
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphLaunch_ptsz);
    return GPUMEMPROF_FOOTPRINT(graphs, first_graph_run(exec), cuGraphLaunch_ptsz(exec, s));
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuGraphExecDestroy);
    return GPUMEMPROF_FOOTPRINT(graphs, true, cuGraphExecDestroy(exec));
}

// Graph memory nodes' memory stays mapped after their executables go, until a trim gives it back:
// measured as the graphs' bucket, which their first launches filled.
CUresult cuDeviceGraphMemTrim(CUdevice device) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuDeviceGraphMemTrim);
    return GPUMEMPROF_FOOTPRINT(graphs, true, cuDeviceGraphMemTrim(device));
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuCtxSetLimit);
    return GPUMEMPROF_FOOTPRINT(limits, true, cuCtxSetLimit(limit, value));
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

// ---- waits, copies, memsets: where a program may first learn that one of its kernels faulted ----
// Exact pass-throughs; a sticky error in the answer is noted (Profiler::note_error). A synchronous
// copy waits for the device, and any copy or memset answers a fault the driver has already seen.
#define GPUMEMPROF_WATCHED(fn, params, args)                                                                           \
    CUresult fn params {                                                                                               \
        GPUMEMPROF_REAL_OR_RETURN(api, fn);                                                                            \
        return prof().watch_errors(*api, [&] { return api->fn args; });                                                \
    }
GPUMEMPROF_WATCHED(cuStreamSynchronize, (CUstream s), (s))
GPUMEMPROF_WATCHED(cuStreamSynchronize_ptsz, (CUstream s), (s))
GPUMEMPROF_WATCHED(cuEventSynchronize, (CUevent e), (e))
GPUMEMPROF_WATCHED(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpyDtoH_v2, (void* dst, CUdeviceptr src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpyDtoH_v2_ptds, (void* dst, CUdeviceptr src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
GPUMEMPROF_WATCHED(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, size_t n, CUstream s), (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dst, const void* src, size_t n, CUstream s),
                   (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemcpyDtoHAsync_v2_ptsz, (void* dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                   (dst, src, n, s))
GPUMEMPROF_WATCHED(cuMemsetD8_v2, (CUdeviceptr dst, unsigned char v, size_t n), (dst, v, n))
GPUMEMPROF_WATCHED(cuMemsetD8_v2_ptds, (CUdeviceptr dst, unsigned char v, size_t n), (dst, v, n))
GPUMEMPROF_WATCHED(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s), (dst, v, n, s))
GPUMEMPROF_WATCHED(cuMemsetD8Async_ptsz, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s), (dst, v, n, s))
GPUMEMPROF_WATCHED(cuMemsetD16_v2, (CUdeviceptr dst, unsigned short v, size_t n), (dst, v, n))
GPUMEMPROF_WATCHED(cuMemsetD16_v2_ptds, (CUdeviceptr dst, unsigned short v, size_t n), (dst, v, n))
GPUMEMPROF_WATCHED(cuMemsetD16Async, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s), (dst, v, n, s))
GPUMEMPROF_WATCHED(cuMemsetD16Async_ptsz, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s), (dst, v, n, s))
GPUMEMPROF_WATCHED(cuMemsetD32_v2, (CUdeviceptr dst, unsigned int v, size_t n), (dst, v, n))
GPUMEMPROF_WATCHED(cuMemsetD32_v2_ptds, (CUdeviceptr dst, unsigned int v, size_t n), (dst, v, n))
GPUMEMPROF_WATCHED(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s), (dst, v, n, s))
GPUMEMPROF_WATCHED(cuMemsetD32Async_ptsz, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s), (dst, v, n, s))
#undef GPUMEMPROF_WATCHED

// ---- context lifetime: a pool must never outlive its context ------------------------------------
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuCtxCreate_v2);
    return prof().ctx_create(*api, pctx, [&] { return api->cuCtxCreate_v2(pctx, flags, dev); });
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int n, unsigned int flags, CUdevice dev) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuCtxCreate_v3);
    return prof().ctx_create(*api, pctx, [&] { return api->cuCtxCreate_v3(pctx, params, n, flags, dev); });
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
    GPUMEMPROF_REAL_OR_RETURN(api, cuCtxCreate_v4);
    return prof().ctx_create(*api, pctx, [&] { return api->cuCtxCreate_v4(pctx, params, flags, dev); });
}

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
