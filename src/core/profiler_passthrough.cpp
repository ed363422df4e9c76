// SPDX-License-Identifier: MIT
// The profiler's side of the memory that passes through to the driver (stream-ordered, managed,
// pinned host, VMM) and of streams and captures: what the hooks of src/intercept/driver_hooks.cpp
// forward to. The accounting itself is the ledger's (core/passthrough_ledger.hpp), the streams'
// the registry's (core/stream_registry.hpp).
#include "core/profiler.hpp"

#include "core/stream_origin.hpp"
#include "stacks/backtrace.hpp"
#include "stacks/recorder.hpp"
#include "util/swallowed.hpp"

namespace gpumemprof::core {

// ---- allocations the driver makes for the program ------------------------------------------------

CUresult Profiler::managed_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes, unsigned flags,
                                 std::uintptr_t caller) noexcept {
    const bool torch = torch_allocator_call(caller, true);
    if (torch && !process_exiting())
        current_slot(api); // where the device's mirror of PyTorch's allocator lives (as for its cudaMalloc)
    const std::uint32_t stack = segment_stack(torch);
    const CUresult r = api.cuMemAllocManaged(dptr, bytes, flags);
    if (r == CUDA_SUCCESS)
        record_alloc_with_stack(torch ? Kind::torch_managed : Kind::managed, api, *dptr, bytes, kDeviceOfCurrentContext,
                                stack);
    return r;
}

CUresult Profiler::async_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool,
                               CUstream stream, bool from_pool, bool ptsz, std::uintptr_t caller) noexcept {
    // The device's baseline is read before its first pool reserves anything (the context's slot
    // reads it once), or what the pool keeps would count twice; not inside a stream capture,
    // which a stream-ordered allocation may be part of (no driver call of ours may join one).
    if (!process_exiting() && streams_.captures.load(std::memory_order_acquire) == 0)
        current_slot(api);
    const bool torch = torch_allocator_call(caller, true);
    const std::uint32_t stack = segment_stack(torch);
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (from_pool)
        r = (ptsz ? api.cuMemAllocFromPoolAsync_ptsz : api.cuMemAllocFromPoolAsync)(dptr, bytes, pool, stream);
    else
        r = (ptsz ? api.cuMemAllocAsync_ptsz : api.cuMemAllocAsync)(dptr, bytes, stream);
    if (r == CUDA_SUCCESS) {
        async_pools_.note_allocation();
        if (from_pool)
            async_pools_.note_pool(api, pool);
        record_alloc_with_stack(torch ? Kind::torch_async : Kind::async, api, *dptr, bytes, kDeviceOfCurrentContext,
                                stack);
    }
    return r;
}

// Pinned host memory: not device memory, but seen and reported as such (device -1).
CUresult Profiler::host_alloc(const DriverApi& api, void** pp, std::size_t bytes, unsigned flags,
                              bool with_flags) noexcept {
    const std::uint32_t stack = capture_stack();
    const CUresult r = with_flags ? api.cuMemHostAlloc(pp, bytes, flags) : api.cuMemAllocHost_v2(pp, bytes);
    if (r == CUDA_SUCCESS)
        record_alloc_with_stack(Kind::host_pinned, api, reinterpret_cast<std::uintptr_t>(*pp), bytes, kHostMemory,
                                stack);
    return r;
}

CUresult Profiler::host_free(const DriverApi& api, void* p) noexcept {
    const CUresult r = api.cuMemFreeHost(p);
    if (r == CUDA_SUCCESS)
        record_free(Kind::host_pinned, reinterpret_cast<std::uintptr_t>(p));
    return r;
}

CUresult Profiler::vmm_create(const DriverApi& api, CUmemGenericAllocationHandle* handle, std::size_t size,
                              const CUmemAllocationProp* prop, unsigned long long flags,
                              std::uintptr_t caller) noexcept {
    const bool torch = torch_allocator_call(caller);
    // Threads creating VMM memory may have no current context (HAMi-core #169): the device comes
    // from the allocation's own location.
    const int device = (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) ? prop->location.id : -1;
    // The device's first memory may be pages (PyTorch's expandable segments, JAX): what the
    // driver held before them is read first, or they would count twice.
    if (device >= 0 && !process_exiting()) {
        on_first_cuda_use(); // a fork child forgets its parent's state first
        accounting_baseline(api, device);
    }
    const CUresult r = api.cuMemCreate(handle, size, prop, flags);
    if (r != CUDA_SUCCESS)
        return r;
    if (torch)
        torch_page_created(api, static_cast<std::uintptr_t>(*handle), size, device);
    else
        record_alloc(Kind::vmm_physical, api, static_cast<std::uintptr_t>(*handle), size, device);
    return r;
}

CUresult Profiler::vmm_release(const DriverApi& api, CUmemGenericAllocationHandle handle) noexcept {
    const CUresult r = api.cuMemRelease(handle);
    if (r == CUDA_SUCCESS) {
        record_free(Kind::vmm_physical, static_cast<std::uintptr_t>(handle));
        record_free(Kind::torch_physical, static_cast<std::uintptr_t>(handle));
    }
    return r;
}

CUresult Profiler::vmm_map(const DriverApi& api, CUdeviceptr ptr, std::size_t size, std::size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags,
                           std::uintptr_t caller) noexcept {
    if (torch_allocator_call(caller)) // its pages: the mirror sees them mapped
        return api.cuMemMap(ptr, size, offset, handle, flags);
    const std::uint32_t stack = capture_stack();
    const CUresult r = api.cuMemMap(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS) {
        const int device = ledger_.handle_device(static_cast<std::uintptr_t>(handle));
        if (device >= 0)
            record_alloc_with_stack(Kind::vmm_mapped, api, static_cast<std::uintptr_t>(ptr), size, device, stack);
    }
    return r;
}

CUresult Profiler::vmm_unmap(const DriverApi& api, CUdeviceptr ptr, std::size_t size) noexcept {
    const CUresult r = api.cuMemUnmap(ptr, size);
    if (r == CUDA_SUCCESS)
        record_free(Kind::vmm_mapped, static_cast<std::uintptr_t>(ptr));
    return r;
}

// ---- streams ------------------------------------------------------------------------------------

CUresult Profiler::stream_created(const DriverApi& api, CUresult r, CUstream* stream, unsigned flags) noexcept {
    CUcontext ctx = nullptr;
    if (r != CUDA_SUCCESS || api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
        return r;
    const bool library_stream = note_stream_created();
    streams_.created(api, ctx, *stream, flags, library_stream);
    return r;
}

CUresult Profiler::stream_destroy(const DriverApi& api, CUstream stream) noexcept {
    streams_.remove(api, stream);
    return api.cuStreamDestroy_v2(stream);
}

// ---- what is recorded ------------------------------------------------------------------------------

// The stack of a rare event the reports point at (what ended reuse at once): with stack capture
// off (GPUMEMPROF_STACK_DEPTH=0) the native frames are still kept: `ips` when the caller has
// unwound already, else unwound here.
std::uint32_t Profiler::origin_stack(const std::uintptr_t* ips, int n) noexcept {
    if (const std::uint32_t id = capture_stack())
        return id;
    std::uintptr_t own[kOriginFrames];
    if (ips == nullptr) {
        n = stacks::capture_backtrace(own, kOriginFrames, 0);
        ips = own;
    }
    return n > 0 ? stacks::Recorder::instance().intern(ips, n) : 0;
}

bool Profiler::note_stream_created() noexcept {
    std::uintptr_t ips[kOriginFrames];
    const int n = stacks::capture_backtrace(ips, kOriginFrames, 0);
    if (created_by_joining_library(ips, n)) {
        streams_.add_library_stream();
        return true;
    }
    if (!streams_.unordered())
        streams_.mark_unordered(OrderLoss::stream_created, origin_stack(ips, n));
    return false;
}

std::uint32_t Profiler::capture_stack() noexcept {
    return stacks::Recorder::instance().capture();
}

std::uint32_t Profiler::segment_stack(bool torch) noexcept {
    return torch && torch_.attached() ? 0 : capture_stack();
}

std::uint32_t Profiler::capture_stack(std::size_t requested) noexcept {
    return stacks::Recorder::instance().capture(requested); // sampled (GPUMEMPROF_STACK_SAMPLE)
}

void Profiler::record_alloc(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes,
                            int device) noexcept {
    record_alloc_with_stack(kind, api, key, bytes, device, 0);
}

void Profiler::record_alloc_with_stack(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes,
                                       int device, std::uint32_t stack) noexcept {
    const LateUpdate update;
    if (!update.allowed())
        return;
    try {
        on_first_cuda_use();
        device = ledger_.record(kind, api, key, bytes, device, stack);
        // PyTorch's segments are read once its event has reached the mirror (profiler_torch.cpp).
        if (kind == Kind::async || kind == Kind::vmm_physical) {
            note_device_memory_acquired(device);
            account_if_acquired(api);
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void Profiler::record_free(Kind kind, std::uintptr_t key) noexcept {
    const LateUpdate update;
    if (update.allowed())
        ledger_.release(kind, key);
}

} // namespace gpumemprof::core
