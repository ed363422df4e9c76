// SPDX-License-Identifier: MIT
#include "core/profiler.hpp"

#include "core/framework_env.hpp"
#include "core/oom_notices.hpp"
#include "core/pool_events.hpp"
#include "core/process_images.hpp"
#include "core/process_state.hpp"
#include "core/signals.hpp"
#include "core/stream_origin.hpp"
#include "report/html_report.hpp"
#include "report/reports.hpp"
#include "report/torch_snapshot.hpp"
#include "stacks/backtrace.hpp"
#include "stacks/python_frames.hpp"
#include "stacks/recorder.hpp"
#include "stats/device_stats.hpp"
#include "trace/writer.hpp"
#include "util/atomic_file.hpp"
#include "util/log.hpp"
#include "util/swallowed.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace gpumemprof::core {
namespace {

constexpr std::size_t kPitchAlignment = 512;

} // namespace

Profiler::Profiler(const util::Options& options) : options_(options), start_(std::chrono::steady_clock::now()) {
    std::vector<std::string> conf_warnings;
    conf_ = pool::parse_alloc_conf(options_.alloc_conf, &conf_warnings);
    for (const auto& w : conf_warnings)
        log::warn("GPUMEMPROF_ALLOC_CONF: {}", w);
    if (conf_.expandable_segments && !options_.pool)
        log::warn("GPUMEMPROF_ALLOC_CONF: expandable_segments:True has no effect with GPUMEMPROF_POOL=0 "
                  "(every allocation goes to the driver as the program made it)");
}

void Profiler::set_framework_env() noexcept {
    framework_env_ = core::set_framework_env(options_);
}

// ---- pools ------------------------------------------------------------------------------------

PoolSlot* Profiler::current_slot(const DriverApi& api) noexcept {
    CUcontext ctx = nullptr;
    if (api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return nullptr;
    if (PoolSlot* p = pools_.find_live(ctx))
        return p;
    return create_slot(api, ctx);
}

PoolSlot* Profiler::create_slot(const DriverApi& api, CUcontext ctx) noexcept {
    try {
        CUdevice dev = 0;
        if (api.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
            return nullptr;
        // Is ctx the device's primary context? Needed so a primary-context reset drops its pool.
        bool primary = false;
        unsigned flags = 0;
        int active = 0;
        if (api.cuDevicePrimaryCtxGetState && api.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS &&
            active) {
            CUcontext pctx = nullptr;
            if (api.cuDevicePrimaryCtxRetain(&pctx, dev) == CUDA_SUCCESS) {
                primary = pctx == ctx;
                api.cuDevicePrimaryCtxRelease_v2(dev);
            }
        }
        on_first_cuda_use();                             // before the pool's listener is given the trace
        accounting_baseline(api, static_cast<int>(dev)); // before the context's first allocation
        // Two contexts have two legacy streams, unordered with each other.
        bool another = false;
        pools_.for_each_live([&](PoolSlot* s) { return another = s->ctx.load(std::memory_order_acquire) != ctx; });
        if (another && !streams_.unordered())
            streams_.mark_unordered(OrderLoss::second_context, origin_stack());
        PoolSlot* raw = pools_.find_or_add(ctx, [&](int index) {
            auto slot = std::make_unique<PoolSlot>();
            slot->device = static_cast<int>(dev);
            slot->primary = primary;
            slot->index = index;
            slot->backend = std::make_unique<DriverBackend>(api, ctx, streams_);
            std::size_t total = 0;
            if (api.cuDeviceTotalMem_v2 && api.cuDeviceTotalMem_v2(&total, dev) == CUDA_SUCCESS)
                slot->total_bytes = total;
            if (options_.model)
                slot->model = std::make_unique<pool::PoolModel>(conf_, slot->device, total);
            // Attached to PyTorch's allocator, the trace records its events (what `replay` is for);
            // the few requests of other libraries our pool serves then stay out of it.
            const PoolEventSinks sinks{stacks::Recorder::instance(), OomNotices::instance(),
                                       torch_.attached() ? nullptr : trace_.load(std::memory_order_acquire),
                                       slot->model.get()};
            slot->events =
                std::make_unique<PoolEvents>(slot->device, conf_, sinks, start_, options_.html || options_.pickle,
                                             static_cast<std::uint64_t>(index));
            emit(trace_.load(std::memory_order_acquire), trace::EventType::device_info, slot->device, 0, total, total);
            pool::PoolOptions po;
            po.conf = conf_;
            po.mode = options_.pool ? pool::Mode::caching : pool::Mode::passthrough;
            po.defer_frees = options_.fenced_reuse;
            po.reuse_when_ordered = options_.reuse_when_ordered;
            po.device = slot->device;
            slot->pool = std::make_unique<pool::DevicePool>(*slot->backend, po, slot->events.get());
            return slot;
        });
        if (!raw) {
            log::warn("no pool could be made for CUDA context {} (out of host memory): its allocations pass "
                      "through unpooled",
                      static_cast<void*>(ctx));
            return nullptr;
        }
        log::debug("new pool for context {} on device {} ({})", static_cast<void*>(ctx), raw->device,
                   primary ? "primary" : "created");
        return raw;
    } catch (...) {
        return nullptr;
    }
}

CUresult Profiler::mem_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes,
                             std::uintptr_t caller) noexcept {
    // Invalid arguments, teardown and threads without a context get the driver's own answer.
    if (!dptr || bytes == 0 || process_exiting())
        return api.cuMemAlloc_v2(dptr, bytes);
    if (torch_allocator_call(caller))
        return torch_segment_alloc(api, dptr, bytes);
    PoolSlot* slot = current_slot(api);
    if (!slot)
        return api.cuMemAlloc_v2(dptr, bytes);
    if (const int fault = slot->sticky_error.load(std::memory_order_relaxed)) [[unlikely]]
        return static_cast<CUresult>(fault); // the driver's answer, as it gives it to every call
    // Unwind before any lock: the pool's listener charges the block (and any segment the pool
    // has to obtain for it) to this stack.
    const stacks::StackId stack = capture_stack(bytes); // 0 at once when capture is off
    std::uintptr_t p = 0;
    int r = slot->pool->malloc(bytes, 0, &p, stack);
    account_if_acquired(api);
    if (r == pool::kSuccess) {
        *dptr = static_cast<CUdeviceptr>(p);
    } else if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        context_lost(slot, static_cast<CUresult>(r));
    } else if (r != pool::kOutOfMemory) {
        note_error(api, static_cast<CUresult>(r), slot);
        // A device error: the program gets it as the driver gave it. Said here (a few times) and
        // counted per code in the report (devices[].driver_errors).
        static std::atomic<int> warned{0};
        if (warned.fetch_add(1, std::memory_order_relaxed) < 5)
            log::warn("the driver answered CUDA error {} to a cuMemAlloc of the pool on device {}; the program's "
                      "request of {} bytes gets that error (counted in the report)",
                      r, slot->device, bytes);
    }
    return static_cast<CUresult>(r);
}

CUresult Profiler::mem_alloc_pitch(const DriverApi& api, CUdeviceptr* dptr, std::size_t* pitch, std::size_t width,
                                   std::size_t height, unsigned element_size, std::uintptr_t caller) noexcept {
    bool valid = dptr && pitch && width && height && (element_size == 4 || element_size == 8 || element_size == 16);
    if (!valid || process_exiting())
        return api.cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
    std::size_t row = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
    if (row < width || height > std::numeric_limits<std::size_t>::max() / row)
        return api.cuMemAllocPitch_v2(dptr, pitch, width, height, element_size); // the driver's answer
    CUresult r = mem_alloc(api, dptr, row * height, caller);
    if (r == CUDA_SUCCESS)
        *pitch = row;
    return r;
}

int Profiler::free_in_pools(const DriverApi& api, std::uintptr_t ptr, bool apply) noexcept {
    if (ptr == 0)
        return pool::kNotOwned;
    int result = pool::kNotOwned;
    if (apply) [[likely]]
        pools_.for_each_live([&](PoolSlot* s) {
            if (const int fault = s->sticky_error.load(std::memory_order_relaxed)) [[unlikely]] {
                // The driver answers a faulted context's every free so, and frees nothing.
                if (!s->pool->lookup(ptr).in_pool)
                    return false;
                result = fault;
                return true;
            }
            const int r = s->pool->free(ptr);
            if (r == pool::kNotOwned)
                return false;
            if (r != pool::kSuccess) [[unlikely]]
                note_error(api, static_cast<CUresult>(r), s); // GPUMEMPROF_POOL=0: the driver's free saw a fault
            result = r;
            return true;
        });
    else
        // Frozen for the final report: the free is answered as it would be, and changes nothing.
        pools_.for_each_live([&](PoolSlot* s) {
            const pool::Lookup l = s->pool->lookup(ptr);
            if (!l.in_pool)
                return false;
            result = l.is_block_start ? pool::kSuccess : pool::kInvalidValue;
            return true;
        });
    if (result == pool::kInvalidValue)
        log::warn("cuMemFree/cudaFree of {:#x}: not the start of a live allocation (double or interior free); "
                  "returning CUDA_ERROR_INVALID_VALUE as the driver does",
                  ptr);
    return result;
}

CUresult Profiler::mem_free(const DriverApi& api, CUdeviceptr ptr) noexcept {
    const LateUpdate update;
    int r = free_in_pools(api, static_cast<std::uintptr_t>(ptr), update.allowed());
    if (r != pool::kNotOwned)
        return static_cast<CUresult>(r);
    CUresult d = api.cuMemFree_v2(ptr);
    if (!update.allowed())
        return d;
    if (d == CUDA_SUCCESS)
        ledger_.freed_by_driver(static_cast<std::uintptr_t>(ptr));
    else
        invalid_foreign_frees_.fetch_add(1, std::memory_order_relaxed);
    return d;
}

CUresult Profiler::mem_free_async(const DriverApi& api, CUdeviceptr ptr, CUstream stream, bool ptsz) noexcept {
    // cudaFreeAsync may free cudaMalloc memory: the block waits for a fence like any free. A
    // per-thread default stream is one order per thread: no more reuse at once.
    if ((ptsz || stream == CU_STREAM_PER_THREAD) && !streams_.unordered())
        streams_.mark_unordered(OrderLoss::per_thread_stream, origin_stack());
    const LateUpdate update;
    int r = free_in_pools(api, static_cast<std::uintptr_t>(ptr), update.allowed());
    if (r != pool::kNotOwned)
        return static_cast<CUresult>(r);
    CUresult d = (ptsz ? api.cuMemFreeAsync_ptsz : api.cuMemFreeAsync)(ptr, stream);
    if (!update.allowed())
        return d;
    if (d == CUDA_SUCCESS)
        ledger_.freed_by_driver(static_cast<std::uintptr_t>(ptr));
    else
        invalid_foreign_frees_.fetch_add(1, std::memory_order_relaxed);
    return d;
}

CUresult Profiler::mem_get_info(const DriverApi& api, std::size_t* free_bytes, std::size_t* total_bytes) noexcept {
    CUresult r = api.cuMemGetInfo_v2(free_bytes, total_bytes);
    if (r != CUDA_SUCCESS) [[unlikely]] {
        note_error(api, r);
        return r;
    }
    if (!free_bytes || process_exiting())
        return r;
    CUdevice dev = 0;
    if (api.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return r;
    // Memory the pool holds but could give back at once counts as free: programs that size
    // themselves from this figure (JAX, vLLM) must not be starved by our cache.
    std::size_t cached = 0;
    pools_.for_each_live([&](PoolSlot* s) {
        if (s->device == static_cast<int>(dev)) {
            s->pool->process_fences(); // blocks the device is done with become releasable
            cached += s->pool->releasable_bytes();
        }
        return false;
    });
    std::size_t f = *free_bytes + cached;
    if (total_bytes && f > *total_bytes)
        f = *total_bytes;
    *free_bytes = f;
    return r;
}

CUresult Profiler::ipc_get_mem_handle(const DriverApi& api, CUipcMemHandle* handle, CUdeviceptr ptr) noexcept {
    bool refused = false;
    pools_.for_each_live([&](PoolSlot* s) {
        pool::Lookup l = s->pool->lookup(static_cast<std::uintptr_t>(ptr));
        if (!l.in_pool)
            return false;
        // A receiver maps the segment from its base: fine when that is exactly this block's start.
        if (l.is_block_start && l.block_address == l.segment_base)
            return true;
        refused = true;
        s->ipc_refused.fetch_add(1, std::memory_order_relaxed);
        log::warn("cuIpcGetMemHandle/cudaIpcGetMemHandle on {:#x}: the pool sub-allocated it at offset {} of a "
                  "{}-byte segment, so another process would map the wrong memory; refusing with "
                  "CUDA_ERROR_INVALID_VALUE. Run with GPUMEMPROF_POOL=0 to profile programs that use legacy CUDA IPC",
                  static_cast<std::uintptr_t>(ptr), static_cast<std::uintptr_t>(ptr) - l.segment_base, l.segment_size);
        return true;
    });
    return refused ? CUDA_ERROR_INVALID_VALUE : api.cuIpcGetMemHandle(handle, ptr);
}

// ---- pointer queries ----------------------------------------------------------------------------

namespace {

/// A host address the driver has no record of (unregistered memory of this library): asked about
/// it, the driver answers as it does for memory it does not know, as a freed block now is.
const char kUnknownMemory = 0;
CUdeviceptr unknown_memory() {
    return reinterpret_cast<CUdeviceptr>(&kUnknownMemory);
}

/// The bytes of `block` the program asked for, as a plain allocation of that size would span.
bool live_at(const pool::Lookup& block, std::uintptr_t ptr) {
    return block.block_allocated && ptr - block.block_address < block.block_requested;
}

} // namespace

pool::Lookup Profiler::pooled_block(std::uintptr_t ptr) const noexcept {
    pool::Lookup found;
    pools_.for_each_live([&](PoolSlot* s) {
        found = s->pool->lookup(ptr);
        return found.in_pool;
    });
    return found;
}

CUresult Profiler::address_range(const DriverApi& api, CUdeviceptr* pbase, std::size_t* psize,
                                 CUdeviceptr ptr) noexcept {
    const pool::Lookup b = pooled_block(static_cast<std::uintptr_t>(ptr));
    if (!b.in_pool)
        return api.cuMemGetAddressRange_v2(pbase, psize, ptr);
    if (!live_at(b, static_cast<std::uintptr_t>(ptr)))
        return api.cuMemGetAddressRange_v2(pbase, psize, unknown_memory());
    // The driver checks the context and arguments; then the block's range replaces the segment's.
    const CUresult r = api.cuMemGetAddressRange_v2(pbase, psize, ptr);
    if (r == CUDA_SUCCESS) {
        if (pbase)
            *pbase = static_cast<CUdeviceptr>(b.block_address);
        if (psize)
            *psize = b.block_requested;
    }
    return r;
}

CUresult Profiler::pointer_attribute(const DriverApi& api, void* data, CUpointer_attribute attribute,
                                     CUdeviceptr ptr) noexcept {
    const pool::Lookup b = pooled_block(static_cast<std::uintptr_t>(ptr));
    if (!b.in_pool)
        return api.cuPointerGetAttribute(data, attribute, ptr);
    if (!live_at(b, static_cast<std::uintptr_t>(ptr)))
        return api.cuPointerGetAttribute(data, attribute, unknown_memory());
    const CUresult r = api.cuPointerGetAttribute(data, attribute, ptr);
    if (r == CUDA_SUCCESS && attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(b.block_address);
    else if (r == CUDA_SUCCESS && attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
        *static_cast<std::size_t*>(data) = b.block_requested;
    return r;
}

CUresult Profiler::pointer_attributes(const DriverApi& api, unsigned count, CUpointer_attribute* attributes,
                                      void** data, CUdeviceptr ptr) noexcept {
    const pool::Lookup b = pooled_block(static_cast<std::uintptr_t>(ptr));
    if (!b.in_pool)
        return api.cuPointerGetAttributes(count, attributes, data, ptr);
    if (!live_at(b, static_cast<std::uintptr_t>(ptr)))
        return api.cuPointerGetAttributes(count, attributes, data, unknown_memory());
    const CUresult r = api.cuPointerGetAttributes(count, attributes, data, ptr);
    if (r != CUDA_SUCCESS || !attributes || !data)
        return r;
    for (unsigned i = 0; i < count; ++i) {
        if (!data[i])
            continue;
        if (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
            *static_cast<CUdeviceptr*>(data[i]) = static_cast<CUdeviceptr>(b.block_address);
        else if (attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
            *static_cast<std::size_t*>(data[i]) = b.block_requested;
    }
    return r;
}

// ---- contexts ---------------------------------------------------------------------------------

void Profiler::drop_context(CUcontext ctx, bool device_footprint) noexcept {
    const LateUpdate update;
    if (!update.allowed())
        return;
    ledger_.context_gone(ctx);
    // The driver's own memory goes with the context, and a later one loads its kernels anew.
    // A created context's destroy leaves the primary context's (ctx_destroy gives back its own).
    if (const PoolSlot* s = pools_.find_live(ctx); s != nullptr && device_footprint)
        footprint_.clear_device(s->device);
    footprint_.forget_handles();
    try {
        // Under the table's lock: a destroyed context's pool that the table no longer keeps
        // whole leaves its figures in its device's folded entry.
        pools_.drop(ctx, [this](const PoolSlot& s) { retired_.fold(device_summary(s, {}, false)); });
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    streams_.forget_context(ctx);
}

namespace {

/// The errors after which a context can run nothing more: its every later call answers the same
/// (the driver's documentation of each says "the process must be terminated and relaunched").
bool is_sticky_error(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED: return true;
    default: return false;
    }
}

} // namespace

void Profiler::note_error(const DriverApi& api, CUresult r, PoolSlot* slot) noexcept {
    if (!is_sticky_error(r) || process_exiting())
        return; // after the exit has begun the pools take no more requests
    if (!slot) {
        CUcontext ctx = nullptr;
        if (api.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
            return;
        slot = pools_.find_live(ctx);
    }
    int none = 0;
    if (!slot || !slot->sticky_error.compare_exchange_strong(none, static_cast<int>(r), std::memory_order_acq_rel))
        return;
    log::warn("a kernel on device {} faulted (the driver answered CUDA error {}): its context can run nothing more, "
              "and from now on the pool answers that error to its allocations and frees, as the driver does",
              slot->device, static_cast<int>(r));
}

void Profiler::context_lost(PoolSlot* slot, CUresult code) noexcept {
    // The driver says the pool's context is gone, though no cuCtxDestroy or reset came through
    // us: its memory went with it. Drop the pool, so that frees of its pointers get the driver's
    // own answer and the report stops counting its blocks live.
    CUcontext ctx = slot->ctx.load(std::memory_order_acquire);
    if (!ctx)
        return;
    log::warn("the CUDA context {} of device {} was lost without cuCtxDestroy or a reset (the driver answered "
              "error {} to an allocation): its pool and the memory it held are dropped",
              static_cast<void*>(ctx), slot->device, static_cast<int>(code));
    drop_context(ctx);
}

std::vector<CUcontext> Profiler::primary_contexts(const DriverApi& api, int device) noexcept {
    std::vector<CUcontext> out;
    try {
        out = pools_.primary_contexts(device);
        // The device's primary context even without a pool (a program that made only
        // stream-ordered or managed allocations there). Retain and release: the count is unchanged.
        unsigned flags = 0;
        int active = 0;
        CUcontext ctx = nullptr;
        if (!process_exiting() && api.cuDevicePrimaryCtxGetState &&
            api.cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active &&
            api.cuDevicePrimaryCtxRetain(&ctx, device) == CUDA_SUCCESS) {
            api.cuDevicePrimaryCtxRelease_v2(device);
            if (ctx && std::find(out.begin(), out.end(), ctx) == out.end())
                out.push_back(ctx);
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return out;
}

CUresult Profiler::primary_reset(const DriverApi& api, CUdevice device) noexcept {
    for (CUcontext c : primary_contexts(api, static_cast<int>(device)))
        drop_context(c);
    return api.cuDevicePrimaryCtxReset_v2(device);
}

CUresult Profiler::primary_release(const DriverApi& api, CUdevice device) noexcept {
    // Found before the release: after the last one the context is gone, and retaining it to
    // learn its handle would make it again.
    const std::vector<CUcontext> ctxs = primary_contexts(api, static_cast<int>(device));
    const CUresult r = api.cuDevicePrimaryCtxRelease_v2(device);
    unsigned flags = 0;
    int active = 1;
    // Only the last release destroys the primary context.
    if (r == CUDA_SUCCESS && api.cuDevicePrimaryCtxGetState &&
        api.cuDevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && !active)
        for (CUcontext c : ctxs)
            drop_context(c);
    return r;
}

// ---- C API -------------------------------------------------------------------------------------

int Profiler::resolve_device(int device) noexcept {
    if (device >= 0)
        return device;
    const DriverApi* api = driver(false);
    CUdevice dev = 0;
    if (api && !process_exiting() && api->cuCtxGetDevice(&dev) == CUDA_SUCCESS)
        return static_cast<int>(dev);
    return 0;
}

stats::DeviceStats Profiler::ledger_only_stats(const DeviceLedger* ledger) const {
    stats::DeviceStats st;
    st.max_split_size = static_cast<std::int64_t>(conf_.max_split_size); // as the pool: SIZE_MAX reads -1
    if (ledger) {
        // VMM maps/unmaps count as device allocations/frees, as torch documents num_device_alloc.
        st.num_device_alloc = ledger->device_allocs;
        st.num_device_free = ledger->device_frees;
    }
    return st;
}

stats::DeviceStats Profiler::merged_stats(const PoolSlot* slot, const std::map<int, DeviceLedger>& ledgers) const {
    stats::DeviceStats st = slot->pool->stats();
    auto it = ledgers.find(slot->device);
    if (it != ledgers.end() && pools_.carries_ledger(slot)) {
        st.num_device_alloc += it->second.device_allocs;
        st.num_device_free += it->second.device_frees;
    }
    return st;
}

bool Profiler::device_stats(int device, stats::DeviceStats* out) noexcept {
    try {
        device = resolve_device(device);
        // Attached to PyTorch's allocator: its figures, as rebuilt here; the two counters no event
        // shows are PyTorch's own (read before any lock of ours: its mutex comes first).
        if (device >= 0 && device < kMaxTorchDevices) {
            if (PoolSlot* s = torch_slots_[device].load(std::memory_order_acquire)) {
                torch_drain();
                stats::DeviceStats theirs;
                if (torch_.read_stats(device, &theirs))
                    s->torch->set_untraced_counters(theirs.num_alloc_retries, theirs.num_sync_all_streams);
                *out = s->torch->stats();
                return true;
            }
        }
        auto ledgers = ledger_.snapshot();
        auto lock = pools_.lock();
        // The live pool of that device if there is one, else the last one it had.
        const PoolSlot* pick = nullptr;
        for (const auto& s : pools_.all())
            if (s->device == device &&
                (s->ctx.load(std::memory_order_acquire) || !pick || !pick->ctx.load(std::memory_order_acquire)))
                pick = s.get();
        if (pick) {
            *out = merged_stats(pick, ledgers);
        } else {
            auto it = ledgers.find(device);
            *out = ledger_only_stats(it != ledgers.end() ? &it->second : nullptr);
        }
        return true;
    } catch (...) {
        return false;
    }
}

void Profiler::reset_peak(int device) noexcept {
    reset_stats(device, true);
}

void Profiler::reset_accumulated(int device) noexcept {
    reset_stats(device, false);
}

void Profiler::reset_stats(int device, bool peak) noexcept {
    const LateUpdate update;
    if (!update.allowed())
        return;
    try {
        device = resolve_device(device);
        pools_.for_each_pool_of(device, [peak](PoolSlot& s) {
            const auto reset = [peak](auto& stats) {
                if (peak)
                    stats.reset_peak_stats();
                else
                    stats.reset_accumulated_stats();
            };
            reset(*s.pool);
            if (s.model)
                reset(*s.model);
            if (s.torch_ready.load(std::memory_order_acquire))
                reset(*s.torch);
        });
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

std::int64_t Profiler::mark_step(std::int64_t step) noexcept {
    if (process_exiting())
        return -1;
    try {
        report::StepMark mark;
        mark.step = step;
        {
            auto lock = pools_.lock();
            mark.t_ns =
                std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
            for (const auto& s : pools_.all()) {
                if (!s->ctx.load(std::memory_order_acquire))
                    continue;
                const stats::DeviceStats st = s->pool->stats();
                mark.devices.push_back(
                    {s->device, st.allocated_bytes[stats::kAll].current, st.reserved_bytes[stats::kAll].current});
            }
        }
        step = steps_.add(std::move(mark));
        emit(trace_.load(std::memory_order_acquire), trace::EventType::step, 0, 0, static_cast<std::size_t>(step),
             static_cast<std::size_t>(step));
        return step;
    } catch (...) {
        return -1;
    }
}

void Profiler::empty_cache() noexcept {
    if (process_exiting())
        return;
    pools_.for_each_live([](PoolSlot* s) {
        const std::int64_t reserved = s->pool->stats().reserved_bytes[stats::kAll].current;
        s->pool->empty_cache();
        if (s->model)
            s->model->empty_cache();
        s->events->on_empty_cache(*s->pool, reserved); // after the model's: its reserved bytes drop too
        return false;
    });
}

} // namespace gpumemprof::core
