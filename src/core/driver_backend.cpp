// SPDX-License-Identifier: MIT
#include "core/driver_backend.hpp"

#include "core/process_state.hpp"
#include "core/scoped_context.hpp"

namespace gpumemprof::core {

DriverBackend::DriverBackend(const DriverApi& api, CUcontext ctx, StreamRegistry& streams)
    : api_(api), ctx_(ctx), streams_(streams) {}

int DriverBackend::allocate(std::size_t size, std::uintptr_t* ptr) {
    if (process_exiting())
        return pool::kOutOfMemory;
    ScopedContext scope(api_, ctx_);
    CUdeviceptr p = 0;
    CUresult r = api_.cuMemAlloc_v2(&p, size);
    if (r == CUDA_SUCCESS)
        *ptr = static_cast<std::uintptr_t>(p);
    return static_cast<int>(r);
}

int DriverBackend::release(std::uintptr_t ptr, std::size_t) {
    if (process_exiting())
        return pool::kSuccess; // the driver reclaims everything at teardown
    ScopedContext scope(api_, ctx_);
    return static_cast<int>(api_.cuMemFree_v2(static_cast<CUdeviceptr>(ptr)));
}

int DriverBackend::memory_info(std::size_t* free_bytes, std::size_t* total_bytes) {
    if (process_exiting())
        return pool::kInvalidValue;
    ScopedContext scope(api_, ctx_);
    return static_cast<int>(api_.cuMemGetInfo_v2(free_bytes, total_bytes));
}

int DriverBackend::device() {
    if (device_ < 0) {
        ScopedContext scope(api_, ctx_);
        CUdevice d = 0;
        if (api_.cuCtxGetDevice(&d) == CUDA_SUCCESS)
            device_ = static_cast<int>(d);
    }
    return device_;
}

namespace {

// What PyTorch's ExpandableSegment asks cuMemCreate for: pinned device memory of `device`.
// (PyTorch also asks for a POSIX fd handle type, for IPC; the pool shares nothing, so none here.)
CUmemAllocationProp page_prop(int device) {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

} // namespace

int DriverBackend::vmm_granularity(std::size_t* bytes) {
    if (process_exiting() || !api_.cuMemGetAllocationGranularity)
        return pool::kNotSupported;
    const int dev = device();
    if (dev < 0)
        return pool::kInvalidValue;
    const CUmemAllocationProp prop = page_prop(dev);
    return static_cast<int>(api_.cuMemGetAllocationGranularity(bytes, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

int DriverBackend::address_reserve(std::size_t size, std::uintptr_t* va) {
    if (process_exiting())
        return pool::kOutOfMemory;
    if (!api_.cuMemAddressReserve)
        return pool::kNotSupported;
    ScopedContext scope(api_, ctx_);
    CUdeviceptr p = 0;
    const CUresult r = api_.cuMemAddressReserve(&p, size, 0, 0, 0);
    if (r == CUDA_SUCCESS)
        *va = static_cast<std::uintptr_t>(p);
    return static_cast<int>(r);
}

int DriverBackend::address_free(std::uintptr_t va, std::size_t size) {
    if (process_exiting() || !api_.cuMemAddressFree)
        return pool::kSuccess; // the driver reclaims everything at teardown
    ScopedContext scope(api_, ctx_);
    return static_cast<int>(api_.cuMemAddressFree(static_cast<CUdeviceptr>(va), size));
}

int DriverBackend::page_create(std::size_t size, pool::PageHandle* page) {
    if (process_exiting())
        return pool::kOutOfMemory;
    if (!api_.cuMemCreate)
        return pool::kNotSupported;
    const int dev = device();
    if (dev < 0)
        return pool::kInvalidValue;
    ScopedContext scope(api_, ctx_);
    const CUmemAllocationProp prop = page_prop(dev);
    CUmemGenericAllocationHandle h = 0;
    const CUresult r = api_.cuMemCreate(&h, size, &prop, 0);
    if (r == CUDA_SUCCESS)
        *page = static_cast<pool::PageHandle>(h);
    return static_cast<int>(r);
}

int DriverBackend::page_release(pool::PageHandle page) {
    if (process_exiting() || !api_.cuMemRelease)
        return pool::kSuccess;
    ScopedContext scope(api_, ctx_);
    return static_cast<int>(api_.cuMemRelease(static_cast<CUmemGenericAllocationHandle>(page)));
}

int DriverBackend::page_map(std::uintptr_t va, std::size_t size, pool::PageHandle page) {
    if (process_exiting())
        return pool::kOutOfMemory;
    if (!api_.cuMemMap)
        return pool::kNotSupported;
    ScopedContext scope(api_, ctx_);
    return static_cast<int>(
        api_.cuMemMap(static_cast<CUdeviceptr>(va), size, 0, static_cast<CUmemGenericAllocationHandle>(page), 0));
}

int DriverBackend::page_unmap(std::uintptr_t va, std::size_t size) {
    if (process_exiting() || !api_.cuMemUnmap)
        return pool::kSuccess;
    ScopedContext scope(api_, ctx_);
    return static_cast<int>(api_.cuMemUnmap(static_cast<CUdeviceptr>(va), size));
}

int DriverBackend::set_access(std::uintptr_t va, std::size_t size) {
    if (process_exiting())
        return pool::kOutOfMemory;
    if (!api_.cuMemSetAccess)
        return pool::kNotSupported;
    const int dev = device();
    if (dev < 0)
        return pool::kInvalidValue;
    ScopedContext scope(api_, ctx_);
    CUmemAccessDesc desc = {};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = dev;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return static_cast<int>(api_.cuMemSetAccess(static_cast<CUdeviceptr>(va), size, &desc, 1));
}

CUevent DriverBackend::take_event() {
    if (!spare_events_.empty()) {
        CUevent e = spare_events_.back();
        spare_events_.pop_back();
        return e;
    }
    CUevent e = nullptr;
    if (api_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return nullptr;
    return e;
}

pool::FenceId DriverBackend::fence_record() {
    // Recording on the legacy stream during a capture would invalidate the capture
    // (cudaErrorStreamCaptureImplicit); pending blocks simply wait until it ends.
    if (process_exiting() || streams_.captures.load(std::memory_order_acquire) > 0)
        return 0;
    try {
        std::lock_guard lock(mutex_);
        std::vector<CUevent> events;
        scratch_streams_.clear();
        scratch_streams_.push_back(nullptr); // the legacy default stream
        streams_.fence_targets(ctx_, &scratch_streams_, &events);
        const std::size_t orphans = events.size();
        events.reserve(orphans + scratch_streams_.size());
        ScopedContext scope(api_, ctx_);
        for (CUstream s : scratch_streams_) {
            CUevent e = take_event();
            if (!e || api_.cuEventRecord(e, s) != CUDA_SUCCESS) {
                // Cannot prove this stream is past the free: give up on this fence. Events of
                // destroyed streams go back to the registry for the next one.
                if (e)
                    spare_events_.push_back(e);
                streams_.return_orphans(ctx_, std::vector<CUevent>(events.begin(), events.begin() + orphans));
                for (std::size_t i = orphans; i < events.size(); ++i)
                    spare_events_.push_back(events[i]);
                return 0;
            }
            events.push_back(e);
        }
        pool::FenceId id = next_fence_++;
        fences_.emplace(id, std::move(events));
        return id;
    } catch (...) {
        return 0; // out of host memory: the blocks stay pending
    }
}

bool DriverBackend::fence_done(pool::FenceId fence) {
    if (streams_.captures.load(std::memory_order_acquire) > 0)
        return false; // event queries are not allowed while capturing
    std::lock_guard lock(mutex_);
    auto it = fences_.find(fence);
    if (it == fences_.end())
        return true;
    if (process_exiting())
        return false;
    ScopedContext scope(api_, ctx_);
    for (CUevent e : it->second) {
        CUresult r = api_.cuEventQuery(e);
        if (r == CUDA_ERROR_NOT_READY)
            return false;
        // Any other error means the context can no longer run that work (sticky error):
        // nothing will touch the memory any more.
    }
    return true;
}

bool DriverBackend::fence_wait(pool::FenceId fence) {
    if (streams_.captures.load(std::memory_order_acquire) > 0 || process_exiting())
        return false;
    std::vector<CUevent> events;
    {
        std::lock_guard lock(mutex_);
        auto it = fences_.find(fence);
        if (it == fences_.end())
            return true;
        events = it->second;
    }
    ScopedContext scope(api_, ctx_);
    for (CUevent e : events)
        api_.cuEventSynchronize(e);
    return true;
}

void DriverBackend::fence_release(pool::FenceId fence) {
    std::lock_guard lock(mutex_);
    auto it = fences_.find(fence);
    if (it == fences_.end())
        return;
    for (CUevent e : it->second)
        spare_events_.push_back(e);
    fences_.erase(it);
}

void DriverBackend::forget() {
    std::lock_guard lock(mutex_);
    fences_.clear();
    spare_events_.clear();
}

} // namespace gpumemprof::core
