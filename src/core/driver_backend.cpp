// SPDX-License-Identifier: MIT
#include "core/driver_backend.hpp"

#include "core/process_state.hpp"
#include "core/scoped_context.hpp"

#include <chrono>
#include <sched.h>
#include <thread>

namespace gpumemprof::core {

DriverBackend::DriverBackend(const DriverApi& api, CUcontext ctx, StreamRegistry& streams)
    : api_(api), ctx_(ctx), streams_(streams) {
}

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

std::size_t DriverBackend::take_slot() {
    if (free_slots_.empty()) {
        const std::size_t n = fences_.size();
        const std::size_t grow = n < 8 ? 8 : n;
        fences_.resize(n + grow);
        free_slots_.reserve(n + grow);
        for (std::size_t i = n + grow; i-- > n;)
            free_slots_.push_back(i);
    }
    const std::size_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
}

DriverBackend::Fence* DriverBackend::find(pool::FenceId fence) {
    const std::size_t slot = static_cast<std::size_t>(fence & 0xFFFFFFFFu);
    if (slot >= fences_.size() || fences_[slot].id != fence)
        return nullptr;
    return &fences_[slot];
}

bool DriverBackend::make_join_stream() {
    if (join_ != nullptr)
        return true;
    if (!api_.cuStreamCreate || !api_.cuStreamWaitEvent)
        return false;
    // The real driver's function, not our hook: this stream is the profiler's, not the program's.
    // Non-blocking, so that the legacy stream never waits for it.
    // The driver takes device memory for a stream's queue; read around the creation (a driver
    // call, no lock of ours), so that the accounting can say the profiler made it.
    std::size_t free_before = 0, free_after = 0, total = 0;
    const bool measured = api_.cuMemGetInfo_v2 && api_.cuMemGetInfo_v2(&free_before, &total) == CUDA_SUCCESS;
    if (api_.cuStreamCreate(&join_, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        join_ = nullptr;
    if (join_ && measured && api_.cuMemGetInfo_v2(&free_after, &total) == CUDA_SUCCESS && free_before > free_after)
        own_stream_bytes_.store(static_cast<std::int64_t>(free_before - free_after), std::memory_order_relaxed);
    if (mark_ == nullptr && api_.cuEventCreate(&mark_, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        mark_ = nullptr;
    return join_ != nullptr && mark_ != nullptr;
}

// One event per fence, whatever the number of streams: a mark recorded on each stream the fence
// covers (and each event a destroyed stream left) is waited for by the profiler's join stream,
// on which the fence's own event is then recorded. A wait takes the mark as it is at the call,
// so one mark serves every stream. Recording and waiting only queue work; a query, made once
// per poll, costs several times as much while the device is busy (docs/measurements.md), so a
// fence is polled with one query rather than one per stream.
pool::FenceId DriverBackend::fence_record() {
    // Recording on the legacy stream during a capture would invalidate the capture
    // (cudaErrorStreamCaptureImplicit); pending blocks simply wait until it ends.
    if (process_exiting() || streams_.captures.load(std::memory_order_acquire) > 0)
        return 0;
    try {
        std::lock_guard lock(mutex_);
        ScopedContext scope(api_, ctx_);
        if (!make_join_stream())
            return 0; // the blocks stay pending; a later fence may succeed
        scratch_orphans_.clear();
        auto mark = [this](CUstream s) {
            return api_.cuEventRecord(mark_, s) == CUDA_SUCCESS &&
                   api_.cuStreamWaitEvent(join_, mark_, 0) == CUDA_SUCCESS;
        };
        // The legacy default stream, then the program's streams (none destroyed meanwhile). When
        // the first mark fails, the destroyed streams' events stay with the registry.
        bool ok = mark(nullptr) && streams_.fence_targets(ctx_, &scratch_orphans_, mark);
        for (CUevent e : scratch_orphans_)
            ok = ok && api_.cuStreamWaitEvent(join_, e, 0) == CUDA_SUCCESS;
        CUevent done = ok ? take_event() : nullptr;
        if (done == nullptr || api_.cuEventRecord(done, join_) != CUDA_SUCCESS) {
            // Cannot prove every stream is past the free: give up on this fence. Events of
            // destroyed streams go back to the registry for the next one.
            if (done)
                spare_events_.push_back(done);
            streams_.return_orphans(ctx_, scratch_orphans_);
            return 0;
        }
        // The join stream waits for the orphans now: their events can serve again.
        spare_events_.insert(spare_events_.end(), scratch_orphans_.begin(), scratch_orphans_.end());
        const std::size_t slot = take_slot();
        Fence& f = fences_[slot];
        f.event = done;
        f.id = (next_fence_++ << 32) | slot;
        return f.id;
    } catch (...) {
        return 0; // out of host memory: the blocks stay pending
    }
}

bool DriverBackend::fence_done(pool::FenceId fence) {
    if (streams_.captures.load(std::memory_order_acquire) > 0)
        return false; // event queries are not allowed while capturing
    std::lock_guard lock(mutex_);
    Fence* f = find(fence);
    if (f == nullptr)
        return true;
    if (process_exiting())
        return false;
    ScopedContext scope(api_, ctx_);
    // Any answer but "not ready" means done, or an error after which the context can no longer
    // run that work (sticky error): nothing will touch the memory any more.
    return api_.cuEventQuery(f->event) != CUDA_ERROR_NOT_READY;
}

bool DriverBackend::fence_wait(pool::FenceId fence) {
    if (streams_.captures.load(std::memory_order_acquire) > 0 || process_exiting())
        return false;
    try {
        std::lock_guard lock(mutex_);
        Fence* f = find(fence);
        if (f == nullptr)
            return true;
        ScopedContext scope(api_, ctx_);
        api_.cuEventSynchronize(f->event);
        return true;
    } catch (...) {
        return false;
    }
}

bool DriverBackend::fence_wait_for(pool::FenceId fence, std::uint64_t limit_ns) {
    if (streams_.captures.load(std::memory_order_acquire) > 0 || process_exiting())
        return false;
    std::lock_guard lock(mutex_);
    Fence* f = find(fence);
    if (f == nullptr)
        return true;
    ScopedContext scope(api_, ctx_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(limit_ns);
    // Poll rather than cuEventSynchronize, so that the wait is bounded: the device may be held up
    // by something this process does only after the allocation returns. Yield first (most waits
    // are short), then sleep in small steps.
    for (unsigned spins = 0;; ++spins) {
        if (api_.cuEventQuery(f->event) != CUDA_ERROR_NOT_READY)
            return true; // done, or a sticky error: nothing will run any more
        if (std::chrono::steady_clock::now() >= deadline)
            return false;
        if (spins < 64)
            sched_yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

void DriverBackend::fence_release(pool::FenceId fence) {
    std::lock_guard lock(mutex_);
    Fence* f = find(fence);
    if (f == nullptr)
        return;
    // spare_events_ only grows when this context has more fences in flight than ever before.
    spare_events_.push_back(f->event);
    f->event = nullptr;
    f->id = 0;
    free_slots_.push_back(static_cast<std::size_t>(fence & 0xFFFFFFFFu));
}

bool DriverBackend::synchronize() {
    if (streams_.captures.load(std::memory_order_acquire) > 0 || process_exiting() || !api_.cuCtxSynchronize)
        return false;
    ScopedContext scope(api_, ctx_);
    return api_.cuCtxSynchronize() == CUDA_SUCCESS;
}

bool DriverBackend::frees_ordered() {
    return !streams_.unordered();
}

void DriverBackend::forget() {
    std::lock_guard lock(mutex_);
    join_ = nullptr;
    mark_ = nullptr;
    fences_.clear();
    free_slots_.clear();
    spare_events_.clear();
}

} // namespace gpumemprof::core
