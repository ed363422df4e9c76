// SPDX-License-Identifier: MIT
// The one core behind every door: process state created on first use, the pools (one per CUDA
// context), pass-through accounting, stream/capture tracking, fork and exit handling, reports.
// Hooks in src/intercept/ only forward here.
#pragma once

#include "core/driver_api.hpp"
#include "core/driver_backend.hpp"
#include "core/passthrough_ledger.hpp"
#include "pool/device_pool.hpp"
#include "pool/pool_model.hpp"
#include "util/options.hpp"

namespace gpumemprof::trace { class Writer; }
namespace gpumemprof::report { struct DeviceSummary; struct ReportInput; struct StackReport; }

#include "core/cuda_api.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpumemprof::core {

class PoolEvents;

/// One CUDA context's pool. Never deleted while the process runs: a destroyed context's slot is
/// marked dead (its statistics stay for the report).
struct PoolSlot {
    std::atomic<CUcontext> ctx{nullptr};
    int device = 0;
    bool primary = true;
    int index = 0;
    std::unique_ptr<DriverBackend> backend;
    std::unique_ptr<pool::PoolModel> model; ///< null with GPUMEMPROF_MODEL=0
    std::unique_ptr<PoolEvents> events;
    std::unique_ptr<pool::DevicePool> pool;
    std::atomic<std::int64_t> ipc_refused{0};
    std::size_t total_bytes = 0; ///< device capacity, read when the pool was made (no CUDA at exit)
};

struct DoorCounters {
    std::atomic<std::int64_t> dlsym_substitutions{0};
    std::atomic<std::int64_t> proc_address_substitutions{0};
    std::atomic<std::int64_t> runtime_calls{0};
};

class Profiler {
public:
    static Profiler& instance() noexcept;

    // ---- plain allocations: served by the pool -------------------------------------------
    CUresult mem_alloc(const DriverApi& api, CUdeviceptr* dptr, std::size_t bytes) noexcept;
    CUresult mem_alloc_pitch(const DriverApi& api, CUdeviceptr* dptr, std::size_t* pitch, std::size_t width,
                             std::size_t height, unsigned element_size) noexcept;
    CUresult mem_free(const DriverApi& api, CUdeviceptr ptr) noexcept;
    CUresult mem_free_async(const DriverApi& api, CUdeviceptr ptr, CUstream stream, bool ptsz) noexcept;
    CUresult mem_get_info(const DriverApi& api, std::size_t* free_bytes, std::size_t* total_bytes) noexcept;
    CUresult ipc_get_mem_handle(const DriverApi& api, CUipcMemHandle* handle, CUdeviceptr ptr) noexcept;

    // ---- pass-through, recorded ----------------------------------------------------------
    void record_alloc(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes, int device = -2) noexcept;
    void record_free(Kind kind, std::uintptr_t key) noexcept;
    /// Capture the caller's stack for a pass-through allocation (before calling the driver).
    std::uint32_t capture_stack() noexcept;
    /// Same as record_alloc, charging the allocation to `stack`.
    void record_alloc_with_stack(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes, int device,
                                 std::uint32_t stack) noexcept;
    PassthroughLedger& ledger() { return ledger_; }

    // ---- streams, captures, contexts ----------------------------------------------------
    StreamRegistry& streams() { return streams_; }
    void drop_context(CUcontext ctx) noexcept;
    void drop_primary(int device) noexcept;

    // ---- C API -------------------------------------------------------------------------
    bool device_stats(int device, stats::DeviceStats* out) noexcept;
    void reset_peak(int device) noexcept;
    void reset_accumulated(int device) noexcept;
    void empty_cache() noexcept;
    bool dump(const std::string& prefix) noexcept;

    DoorCounters& doors() { return doors_; }
    const util::Options& options() const { return options_; }

    /// The full exit JSON (also used by gpumemprof_dump).
    std::string report_json(const report::ReportInput& in, const report::StackReport& stacks) noexcept;

    void on_exit() noexcept;
    /// Write what a crash would lose (the trace's pending block). Async-signal context: no locks
    /// beyond the trace writer's own.
    void flush_trace() noexcept;
    void fork_prepare() noexcept;
    void fork_parent() noexcept;
    void fork_child() noexcept;

private:
    Profiler();
    /// At the first device allocation (never in processes that do not use CUDA): open the trace,
    /// start the report thread and take the signals.
    void on_first_cuda_use() noexcept;
    void open_trace() noexcept; // requires first_use_mutex_
    PoolSlot* current_slot(const DriverApi& api) noexcept;
    PoolSlot* create_slot(const DriverApi& api, CUcontext ctx) noexcept;
    /// Call fn(slot) for each live pool until it returns true. No allocation, no lock.
    template <typename Fn> void for_each_live(Fn&& fn) const {
        const int n = live_count_.load(std::memory_order_acquire);
        for (int i = 0; i < n; ++i) {
            PoolSlot* s = live_[i].load(std::memory_order_acquire);
            if (s && s->ctx.load(std::memory_order_acquire) && fn(s))
                return;
        }
    }
    PoolSlot* find_live(CUcontext ctx) const {
        PoolSlot* found = nullptr;
        for_each_live([&](PoolSlot* s) {
            found = s->ctx.load(std::memory_order_acquire) == ctx ? s : nullptr;
            return found != nullptr;
        });
        return found;
    }
    /// Free `ptr` in whichever pool owns it: kSuccess, kInvalidValue, or kNotOwned.
    int free_in_pools(std::uintptr_t ptr) noexcept;
    /// A pass-through allocation freed by the driver leaves the ledger and the recorder.
    void forget_passthrough(std::uintptr_t ptr) noexcept;
    std::vector<PoolSlot*> slots_for_device(int device) const;
    int resolve_device(int device) noexcept;
    bool carries_ledger(const PoolSlot* slot) const; // requires slots_mutex_
    stats::DeviceStats merged_stats(const PoolSlot* slot, const std::map<int, DeviceLedger>& ledgers) const;
    stats::DeviceStats ledger_only_stats(const DeviceLedger* ledger) const;
    report::ReportInput report_input(const std::string& prefix) const; // requires slots_mutex_
    /// One pool's figures for the reports (requires slots_mutex_).
    report::DeviceSummary device_summary(const PoolSlot& s, const std::map<int, DeviceLedger>& ledgers) const;

    util::Options options_;
    pool::AllocConf conf_;
    StreamRegistry streams_;
    PassthroughLedger ledger_;
    DoorCounters doors_;

    std::mutex dump_mutex_;          ///< one report writer at a time; first in the lock order
    mutable std::mutex slots_mutex_;
    static constexpr int kMaxLive = 64;
    std::atomic<PoolSlot*> live_[kMaxLive] = {};
    std::atomic<int> live_count_{0}; ///< slots [0, live_count_) have ever been used
    std::vector<std::unique_ptr<PoolSlot>> all_slots_;
    std::atomic<std::int64_t> invalid_foreign_frees_{0};
    std::chrono::steady_clock::time_point start_;
    std::atomic<trace::Writer*> trace_{nullptr}; ///< GPUMEMPROF_TRACE, null when off or not yet opened
    std::mutex first_use_mutex_;           ///< on_first_cuda_use; taken at fork
    bool forked_child_ = false;            ///< this process is a fork() child (no exec) of a profiled one
    bool child_reset_pending_ = false;     ///< fork child: the parent's state is dropped at first CUDA use
    std::atomic<bool> cuda_seen_{false};   ///< the process allocated through us at least once
    std::atomic<bool> signal_thread_started_{false};
};

} // namespace gpumemprof::core
