// SPDX-License-Identifier: MIT
// The one core behind every door: process state created on first use, routing to the pools (one
// per CUDA context, core/pool_table.hpp), pass-through accounting, stream/capture tracking, fork
// and exit handling, and the snapshot the reports are written from (src/report/).
// Hooks in src/intercept/ only forward here.
#pragma once

#include "core/async_pools.hpp"
#include "core/device_accounting.hpp"
#include "core/driver_api.hpp"
#include "core/driver_footprint.hpp"
#include "core/event_cost.hpp"
#include "core/passthrough_ledger.hpp"
#include "core/pool_table.hpp"
#include "core/process_state.hpp"
#include "core/retired_contexts.hpp"
#include "core/step_marks.hpp"
#include "core/stream_registry.hpp"
#include "core/torch_attach.hpp"
#include "core/torch_autograd.hpp"
#include "core/torch_queue.hpp"
#include "stacks/recorder.hpp"
#include "util/options.hpp"

namespace gpumemprof::trace {
class Writer;
}
namespace gpumemprof::stacks {
struct ReportData;
}
namespace gpumemprof::report {
struct DeviceSummary;
struct ReportInput;
} // namespace gpumemprof::report

#include "core/cuda_api.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpumemprof::core {

struct DoorCounters {
    std::atomic<std::int64_t> dlsym_substitutions{0};
    std::atomic<std::int64_t> proc_address_substitutions{0};
    std::atomic<std::int64_t> runtime_calls{0};
};

class Profiler {
public:
    /// The process's profiler: made at the first call (from the library's constructor or an
    /// earlier hook) from the environment's options, with the process's exit, fork and exec
    /// handlers (profiler_lifetime.cpp). Never destroyed.
    static Profiler& instance() noexcept {
        if (Profiler* p = made_.load(std::memory_order_acquire)) [[likely]]
            return *p;
        return make_instance();
    }
    /// A profiler with these options, touching nothing process-wide (no handler, no environment):
    /// what instance() makes, and what a unit test can make.
    explicit Profiler(const util::Options& options);

    // ---- plain allocations: served by the pool -------------------------------------------
    /// `caller`: the return address of the program's call (core/caller_modules.hpp).
    CUresult mem_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes, std::uintptr_t caller) noexcept;
    CUresult mem_alloc_pitch(const DriverApi& api, CUdeviceptr* dptr, std::size_t* pitch, std::size_t width,
                             std::size_t height, unsigned element_size, std::uintptr_t caller) noexcept;
    CUresult mem_free(const DriverApi& api, CUdeviceptr ptr) noexcept;
    CUresult mem_free_async(const DriverApi& api, CUdeviceptr ptr, CUstream stream, bool ptsz) noexcept;
    CUresult mem_get_info(const DriverApi& api, std::size_t* free_bytes, std::size_t* total_bytes) noexcept;
    /// cuCtxSynchronize (ctx null: the current context): when `sync` succeeds, the blocks freed in
    /// that context's pool before it began become reusable without a fence.
    template <typename Sync> CUresult ctx_synchronize(const DriverApi& api, CUcontext ctx, Sync&& sync) noexcept {
        PoolSlot* slot = nullptr;
        if (!process_exiting() && (ctx || api.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS) && ctx)
            slot = pools_.find_live(ctx);
        const std::uint64_t mark = slot ? slot->pool->pending_mark() : 0;
        CUresult r = sync();
        if (slot && r == CUDA_SUCCESS && mark > 0)
            slot->pool->retire_through(mark);
        if (r != CUDA_SUCCESS) [[unlikely]]
            note_error(api, r, slot);
        return r;
    }
    /// An error the driver answered to one of the program's calls (or ours) on the calling
    /// thread's context (`slot`, or found from the current context when null). One that leaves
    /// the context unusable (is_sticky_error) is kept in its pool's slot: the pool's frees and
    /// allocations answer it from then on, as the driver would.
    void note_error(const DriverApi& api, CUresult r, PoolSlot* slot = nullptr) noexcept;
    /// A pass-through call of the program whose answer may be a kernel's fault (cuStreamSynchronize,
    /// cuEventSynchronize, ...): `call`'s result, noted when it is an error.
    template <typename Call> CUresult watch_errors(const DriverApi& api, Call&& call) noexcept {
        const CUresult r = call();
        if (r != CUDA_SUCCESS) [[unlikely]]
            note_error(api, r);
        return r;
    }
    CUresult ipc_get_mem_handle(const DriverApi& api, CUipcMemHandle* handle, CUdeviceptr ptr) noexcept;
    /// Pointer queries (cuMemGetAddressRange, cuPointerGetAttribute(s), and so the runtime's
    /// cudaPointerGetAttributes): a pointer into a pooled block gets the block's own base and the
    /// size the program asked for, as a plain cuMemAlloc's would; one into a freed (cached or
    /// waiting) block gets the driver's answer for memory it does not know. Other attributes are
    /// the segment's: the context, device, memory type, and BUFFER_ID (the physical memory under
    /// the block stays the segment's while the pool holds it).
    CUresult address_range(const DriverApi& api, CUdeviceptr* pbase, std::size_t* psize, CUdeviceptr ptr) noexcept;
    CUresult pointer_attribute(const DriverApi& api, void* data, CUpointer_attribute attribute,
                               CUdeviceptr ptr) noexcept;
    CUresult pointer_attributes(const DriverApi& api, unsigned count, CUpointer_attribute* attributes, void** data,
                                CUdeviceptr ptr) noexcept;

    // ---- pass-through, recorded (profiler_passthrough.cpp) -----------------------------------
    /// Made by PyTorch's allocator (a MemPool allocator of the program's, `caller`): PyTorch's
    /// segment, counted as its reserved memory (Kind::torch_managed).
    CUresult managed_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes, unsigned flags,
                           std::uintptr_t caller) noexcept;
    /// cuMemAllocAsync(_ptsz), or cuMemAllocFromPoolAsync(_ptsz) with `from_pool`; PyTorch's
    /// segment (Kind::torch_async) when its allocator made it.
    CUresult async_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, CUstream stream,
                         bool from_pool, bool ptsz, std::uintptr_t caller) noexcept;
    /// cuMemAllocHost_v2, or cuMemHostAlloc with `with_flags`.
    CUresult host_alloc(const DriverApi& api, void** pp, std::size_t bytes, unsigned flags, bool with_flags) noexcept;
    CUresult host_free(const DriverApi& api, void* p) noexcept;
    /// cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap (`caller` as mem_alloc's).
    CUresult vmm_create(const DriverApi& api, CUmemGenericAllocationHandle* handle, std::size_t size,
                        const CUmemAllocationProp* prop, unsigned long long flags, std::uintptr_t caller) noexcept;
    CUresult vmm_release(const DriverApi& api, CUmemGenericAllocationHandle handle) noexcept;
    CUresult vmm_map(const DriverApi& api, CUdeviceptr ptr, std::size_t size, std::size_t offset,
                     CUmemGenericAllocationHandle handle, unsigned long long flags, std::uintptr_t caller) noexcept;
    CUresult vmm_unmap(const DriverApi& api, CUdeviceptr ptr, std::size_t size) noexcept;
    /// cuStreamCreate*: the driver answered `r` for *stream.
    CUresult stream_created(const DriverApi& api, CUresult r, CUstream* stream, unsigned flags) noexcept;
    CUresult stream_destroy(const DriverApi& api, CUstream stream) noexcept;
    /// `device`: an ordinal, kHostMemory, or kDeviceOfCurrentContext (looked up).
    void record_alloc(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes,
                      int device = kDeviceOfCurrentContext) noexcept;
    void record_free(Kind kind, std::uintptr_t key) noexcept;
    /// A stream was created on this thread: ends reuse at once unless a joining library (cuDNN)
    /// made it for itself (core/stream_origin.hpp); returns true for such a library stream, which
    /// then needs no fence events of its own. Call outside any pool lock.
    bool note_stream_created() noexcept;
    /// A call stack for a rare event, kept even with stack capture off (native frames then:
    /// `ips`, innermost first, when the caller has them, else unwound here).
    std::uint32_t origin_stack(const std::uintptr_t* ips = nullptr, int n = 0) noexcept;
    static constexpr int kOriginFrames = 32;
    /// Capture the caller's stack for a pass-through allocation (before calling the driver).
    std::uint32_t capture_stack() noexcept;
    /// The same for stream-ordered or managed memory, `torch` when PyTorch's allocator asks for
    /// it: none once attached, as PyTorch's blocks carry the stacks, not its segments.
    std::uint32_t segment_stack(bool torch) noexcept;
    /// The stack of a block of `requested` bytes: 0 for one that sampling skips.
    std::uint32_t capture_stack(std::size_t requested) noexcept;
    /// Same as record_alloc, charging the allocation to `stack`.
    void record_alloc_with_stack(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes, int device,
                                 std::uint32_t stack) noexcept;
    PassthroughLedger& ledger() { return ledger_; }

    // ---- PyTorch's own caching allocator (GPUMEMPROF_TORCH; profiler_torch.cpp) ----------------
    /// True when `caller` lies in PyTorch's allocator and GPUMEMPROF_TORCH leaves it on: the
    /// call is PyTorch's own device memory, passed through and accounted as its reserved memory.
    /// Attaches to it on the first such call (attach mode). With `pools_only`, only a call from
    /// another module with PyTorch's allocator further up the stack (a MemPool's allocator of the
    /// program's) counts: stream-ordered memory straight from PyTorch's allocator is its
    /// `backend:cudaMallocAsync`, which has nothing to attach to.
    bool torch_allocator_call(std::uintptr_t caller, bool pools_only = false) noexcept;
    /// cuMemCreate by PyTorch's allocator (expandable segments): its reserved memory.
    void torch_page_created(const DriverApi& api, std::uintptr_t handle, std::size_t bytes, int device) noexcept;
    const TorchAttach& torch() const { return torch_; }

    // ---- where the device's memory went (profiler_accounting.cpp) -------------------------------
    /// The driver's used figure before `device`'s first allocation through us (its context).
    void accounting_baseline(const DriverApi& api, int device) noexcept;
    /// A reading, if a pool obtained device memory on this thread and one is due (no lock held).
    void account_if_acquired(const DriverApi& api) noexcept;
    /// Each device's reading at exit, before teardown (an atexit handler).
    void accounting_exit() noexcept;
    /// A driver call that may take device memory for the driver itself (core/driver_footprint.hpp):
    /// when `measure`, what the driver's used figure moved by across `call`, less what our
    /// accounting moved meanwhile, goes to `cause`'s bucket.
    template <typename Call>
    CUresult driver_footprint(const DriverApi& api, FootprintCause cause, bool measure, Call&& call) noexcept {
        FootprintWindow w;
        if (measure) [[unlikely]]
            footprint_begin(api, &w);
        const CUresult r = call();
        if (w.active) [[unlikely]]
            footprint_end(api, cause, w);
        if (r != CUDA_SUCCESS) [[unlikely]]
            note_error(api, r);
        return r;
    }
    /// The same for a call of a handle (core/driver_footprint.hpp's first_use): measured when
    /// `use` says so, and the handle's first use ended after the call.
    template <typename Call>
    CUresult driver_footprint(const DriverApi& api, FootprintCause cause, const HandleUse& use, Call&& call) noexcept {
        const CUresult r = driver_footprint(api, cause, use.measure, static_cast<Call&&>(call));
        footprint_.first_use_done(use);
        return r;
    }
    DriverFootprint& footprint() { return footprint_; }
    /// cuStreamBeginCapture*: the first of overlapping captures opens a window whose end (the
    /// last capture's end) measures what the driver took meanwhile (kernels loaded in the
    /// capture, its bookkeeping): no driver call of ours may run inside a capture.
    template <typename Begin> CUresult capture_begin(const DriverApi& api, Begin&& begin) noexcept {
        FootprintWindow w;
        if (streams_.captures.load(std::memory_order_acquire) == 0)
            footprint_begin(api, &w);
        const CUresult r = streams_.capture_begun(begin());
        if (r == CUDA_SUCCESS && w.active)
            capture_window_opened(w);
        return r;
    }
    /// cuStreamEndCapture*.
    template <typename End> CUresult capture_end(const DriverApi& api, CUstream s, bool ptsz, End&& end) noexcept {
        const CUresult r = streams_.end_capture(api, s, ptsz, static_cast<End&&>(end));
        if (streams_.captures.load(std::memory_order_acquire) == 0)
            capture_window_closed(api);
        return r;
    }

    // ---- streams, captures, contexts ----------------------------------------------------
    StreamRegistry& streams() { return streams_; }
    /// The context is about to go: its pool and the memory the driver frees with it. With
    /// `device_footprint`, the driver's own memory on its device is gone too (a primary context's
    /// reset or last release, a lost context); a created context's destroy gives back only its own.
    void drop_context(CUcontext ctx, bool device_footprint = true) noexcept;
    /// cuCtxCreate_v2/v3/v4: what the driver took for the new context, measured when a context of
    /// its device was current (after that device's baseline), goes to the contexts bucket until
    /// the context's destroy gives it back.
    template <typename Create> CUresult ctx_create(const DriverApi& api, CUcontext* pctx, Create&& create) noexcept {
        FootprintWindow w;
        footprint_begin(api, &w);
        const CUresult r = create();
        if (w.active) [[unlikely]]
            context_created(api, w, r == CUDA_SUCCESS && pctx != nullptr ? *pctx : nullptr);
        return r;
    }
    /// cuCtxDestroy_v2: drop_context, then the driver's call; the context's own memory goes back.
    CUresult ctx_destroy(const DriverApi& api, CUcontext ctx) noexcept {
        drop_context(ctx, false);
        const CUresult r = api.cuCtxDestroy_v2(ctx);
        if (r == CUDA_SUCCESS)
            footprint_.context_destroyed(reinterpret_cast<std::uintptr_t>(ctx));
        return r;
    }
    /// The driver answered `code` (the context is invalid or destroyed) to a request of `slot`'s
    /// pool: the context died outside our view; warn and drop its pool.
    void context_lost(PoolSlot* slot, CUresult code) noexcept;
    /// cuDevicePrimaryCtxReset_v2 (cudaDeviceReset): the primary context's pool and memory go first.
    CUresult primary_reset(const DriverApi& api, CUdevice device) noexcept;
    /// cuDevicePrimaryCtxRelease_v2: the last release destroys the primary context.
    CUresult primary_release(const DriverApi& api, CUdevice device) noexcept;

    // ---- C API -------------------------------------------------------------------------
    bool device_stats(int device, stats::DeviceStats* out) noexcept;
    void reset_peak(int device) noexcept;
    void reset_accumulated(int device) noexcept;
    void empty_cache() noexcept;
    bool dump(const std::string& prefix) noexcept { return dump(prefix, false); }
    /// `on_demand`: a dump the signal thread was asked for; skipped once the process exits (the
    /// exit report is, or was, being written, and exit would cut a later write short).
    bool dump(const std::string& prefix, bool on_demand) noexcept;
    /// torch.cuda.memory._snapshot() as JSON (report::write_torch_snapshot); "" on failure.
    std::string snapshot_json() noexcept;
    /// A step begins (gpumemprof_mark_step): recorded with each pool's allocated and reserved
    /// bytes (the JSON's "steps") and as a trace event. A negative `step` is the previous one's
    /// number + 1. Returns the step's number, -1 on failure or once the process exits.
    std::int64_t mark_step(std::int64_t step) noexcept;

    DoorCounters& doors() { return doors_; }
    const util::Options& options() const { return options_; }

    void on_exit() noexcept;
    /// The trace's stack blocks: each call stack its events name, symbolised (before close).
    void write_trace_stacks() noexcept;
    /// Write what a crash would lose (the trace's pending block), after a fatal signal's dump.
    void flush_trace() noexcept;
    /// exec() without fork is about to replace the program (not in a vfork child): this
    /// program's report is written and its trace closed. after_failed_exec: exec returned.
    void before_exec() noexcept;
    void after_failed_exec() noexcept;
    /// An exec hook: `exec` calls libc's function, which returns only when it failed.
    template <typename Exec> int exec_image(Exec&& exec) noexcept {
        before_exec();
        const int r = exec();
        const int saved = errno;
        after_failed_exec();
        errno = saved;
        return r;
    }
    void fork_prepare() noexcept;
    void fork_parent() noexcept;
    void fork_child() noexcept;

    /// GPUMEMPROF_FRAMEWORK_ENV (core/framework_env.hpp): called once from the library's
    /// constructor.
    void set_framework_env() noexcept;

private:
    /// reset_peak (peak) or reset_accumulated: the pools, models and PyTorch mirrors of `device`.
    void reset_stats(int device, bool peak) noexcept;
    /// exit, quick_exit and fork handlers for instance()'s profiler.
    static void install_process_handlers() noexcept;
    /// instance()'s first call: makes the profiler (once, whichever threads race) and publishes it.
    static Profiler& make_instance() noexcept;
    static inline std::atomic<Profiler*> made_{nullptr};
    static void torch_sink(const TorchEvent& ev) noexcept;
    static void torch_deferred(const TorchBlockEvent& b) noexcept;
    bool read_driver_used(const DriverApi& api, int device, AccountingReading* r) noexcept;
    struct FootprintWindow {
        bool active = false;
        int device = 0;
        std::int64_t unexplained = 0; ///< the driver's used figure less our buckets, before the call
    };
    /// The driver's used figure on `device` less our buckets now (false: it cannot be read, or the
    /// current context is another device's).
    bool unexplained_now(const DriverApi& api, int device, std::int64_t* out) noexcept;
    void footprint_begin(const DriverApi& api, FootprintWindow* w) noexcept;
    /// What the driver's used figure moved by in the window, less our accounting's move (added
    /// to `cause`'s bucket; 0 when it could not be read).
    std::int64_t footprint_end(const DriverApi& api, FootprintCause cause, const FootprintWindow& w) noexcept;
    /// ctx_create's window closed: its bytes to the contexts bucket, remembered for the destroy.
    void context_created(const DriverApi& api, const FootprintWindow& w, CUcontext ctx) noexcept;
    void capture_window_opened(const FootprintWindow& w) noexcept;
    void capture_window_closed(const DriverApi& api) noexcept;
    std::mutex capture_window_mutex_;
    FootprintWindow capture_window_; ///< open while captures are under way (requires the mutex)
    /// Our buckets of `device`'s memory. `in_step`: PyTorch's as its segments stand at the
    /// driver calls' returns (the ledger), not as its mirror has heard of them, which the
    /// profiler's thread may still be behind by milliseconds: a footprint window's two readings
    /// must move with the driver's figure, or another thread's segment counts as the driver's.
    void accounting_buckets(int device, AccountingReading* r, bool in_step = false) const;
    /// The figures the buckets are named from. A reading's gate totals them on every allocation
    /// that obtained memory, so they are read without naming a bucket or copying the ledger.
    struct AccountingFigures {
        std::int64_t baseline = 0;
        bool attached = false; ///< PyTorch's allocator followed: its figures, not its segments
        std::int64_t torch_allocated = 0, torch_cached = 0, torch_private = 0, torch_segments = 0;
        std::int64_t pool_allocated = 0, pool_cached = 0, own_streams = 0, async = 0, vmm_physical = 0;
        std::int64_t footprint[kFootprintCauses] = {};
        std::int64_t total() const noexcept; ///< what the buckets sum to
    };
    AccountingFigures accounting_figures(int device, bool in_step) const;
    static TorchControlSink torch_control() noexcept;
    void torch_event(const TorchEvent& ev) noexcept;
    void torch_block_event(const TorchBlockEvent& b, EventCost::Clock& clock) noexcept;
    void torch_segment_event(const TorchEvent& ev, PoolSlot& s) noexcept;
    /// Every PyTorch event so far is handled (core/torch_queue.hpp): before reading what they
    /// built. Never under a lock of ours.
    void torch_drain() noexcept;
    /// The pool slot holding `device`'s mirror of PyTorch's allocator (made at its first event).
    PoolSlot* torch_slot(int device) noexcept;
    CUresult torch_segment_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes) noexcept;
    /// What a call site's frames say of the kind of its memory (read once per site; the time of
    /// that reading goes to `clock`'s traits part exactly, EventCost::Clock::exact).
    MemoryCategories::SiteTraits site_traits(stacks::StackId id, EventCost::Clock& clock) noexcept;
    /// Reads PyTorch's own statistics once more before its allocator is destroyed at exit.
    void torch_final_check() noexcept;
    /// The attached allocator's figures for the reports (requires pools_.lock()).
    report::DeviceSummary torch_summary(const PoolSlot& s) const;
    /// At the first device allocation (never in processes that do not use CUDA): open the trace,
    /// start the report thread and take the signals.
    void on_first_cuda_use() noexcept;
    void open_trace() noexcept;          // requires first_use_mutex_
    void choose_image_suffix() noexcept; // requires first_use_mutex_
    /// The final report's moment (exit, a fatal signal): no change from now on (freeze_state).
    void freeze_final_state() noexcept;
    PoolSlot* current_slot(const DriverApi& api) noexcept;
    PoolSlot* create_slot(const DriverApi& api, CUcontext ctx) noexcept;
    /// The pooled block holding `ptr`: in_pool false when no pool's segment does.
    pool::Lookup pooled_block(std::uintptr_t ptr) const noexcept;
    /// Free `ptr` in whichever pool owns it: kSuccess, kInvalidValue, kNotOwned, or (without
    /// caching) the driver's own error, a sticky one noted for that pool. `apply` false (the state
    /// is frozen): the same answer, nothing freed.
    int free_in_pools(const DriverApi& api, std::uintptr_t ptr, bool apply) noexcept;
    /// The device's primary contexts known to us or to the driver now.
    std::vector<CUcontext> primary_contexts(const DriverApi& api, int device) noexcept;
    int resolve_device(int device) noexcept;
    stats::DeviceStats merged_stats(const PoolSlot* slot,
                                    const std::map<int, DeviceLedger>& ledgers) const; // requires pools_.lock()
    stats::DeviceStats ledger_only_stats(const DeviceLedger* ledger) const;
    /// Everything the reports say, at one moment (takes the pool table's lock).
    report::ReportInput snapshot(const std::string& prefix) const;
    /// snapshot() and the call sites' data, read again while they disagree (frozen state only).
    void consistent_snapshot(const std::string& prefix, report::ReportInput* in, stacks::ReportData* data) const;
    /// Allocations and frees counted so far, pools and pass-through (grows with every one).
    std::int64_t changes() const;
    /// One pool's figures for the reports (requires pools_.lock()); `with_history`: its segments,
    /// memory over time and latest events too.
    report::DeviceSummary device_summary(const PoolSlot& s, const std::map<int, DeviceLedger>& ledgers,
                                         bool with_history = true) const;

    std::vector<std::string> framework_env_; ///< "NAME=value" set by set_framework_env
    util::Options options_;
    pool::AllocConf conf_;
    StreamRegistry streams_;
    PassthroughLedger ledger_{PassthroughConsumers{&stacks::Recorder::instance(), &trace_, &torch_}};
    AsyncPools async_pools_; ///< the pools stream-ordered allocations come from (the accounting)
    DoorCounters doors_;
    StepMarks steps_;

    std::mutex dump_mutex_;   ///< one report writer at a time; first in the lock order
    PoolTable pools_;         ///< second in the lock order (then each pool's own lock)
    RetiredContexts retired_; ///< destroyed contexts the table no longer keeps (requires pools_.lock())
    std::atomic<std::int64_t> invalid_foreign_frees_{0};
    std::chrono::steady_clock::time_point start_;
    util::CycleClock ticks_; ///< turns the time-stamp counter of PyTorch's events into start_'s clock
    std::atomic<trace::Writer*> trace_{nullptr}; ///< GPUMEMPROF_TRACE, null when off or not yet opened
    std::mutex first_use_mutex_;                 ///< on_first_cuda_use; taken at fork
    bool forked_child_ = false;                  ///< this process is a fork() child (no exec) of a profiled one
    bool child_reset_pending_ = false;           ///< fork child: the parent's state is dropped at first CUDA use
    std::atomic<bool> cuda_seen_{false};         ///< the process allocated through us at least once
    /// GPUMEMPROF_OUTPUT anchored to the directory the process was in at its first CUDA use (set
    /// before cuda_seen_).
    std::string output_pattern_;
    int owner_pid_ = 0;        ///< the process that set cuda_seen_ (a vfork child is not it)
    std::string image_suffix_; ///< ".exec<k>" after an earlier program image's report, else ""
    std::atomic<bool> trace_closed_at_exec_{false};
    std::atomic<bool> signal_thread_started_{false};

    TorchAttach torch_;
    TorchAutograd autograd_; ///< initialised with the first device's mirror
    EventCost torch_cost_;   ///< what handling its events costs (the report's "torch_events")
    TorchQueue torch_queue_{&Profiler::torch_deferred}; ///< its block events, to our thread
    DeviceAccounting accounting_;
    DriverFootprint footprint_;
    static constexpr int kMaxTorchDevices = 128; ///< PyTorch's DeviceIndex is an int8
    std::atomic<PoolSlot*> torch_slots_[kMaxTorchDevices] = {};
    std::mutex torch_mutex_; ///< making a device's mirror; taken under PyTorch's allocator mutex
};

} // namespace gpumemprof::core
