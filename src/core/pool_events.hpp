// SPDX-License-Identifier: MIT
// What the core does with the pool's events: attribute them to call stacks (stacks::Recorder),
// keep the device's memory time series and latest events (for the HTML report and the PyTorch
// snapshot) and append them to the GPUMEMPROF_TRACE log. Called under the pool's lock, which
// also guards the history (readers take it through DevicePool::with_lock); never calls back.
#pragma once

#include "core/trace_events.hpp"
#include "pool/device_pool.hpp"
#include "pool/pool_model.hpp"
#include "stacks/trace_tree.hpp"
#include "stats/event_ring.hpp"
#include "stats/time_series.hpp"
#include "util/cycle_clock.hpp"

#include <chrono>
#include <functional>
#include <string>

namespace gpumemprof::stacks {
class Recorder;
}

namespace gpumemprof::core {

class OomNotices;

/// What PoolEvents feeds besides its own history, each handed to it (none looked up).
struct PoolEventSinks {
    stacks::Recorder& sites; ///< the call sites' bytes, acquisitions and OOM records
    OomNotices& ooms;        ///< the OOM notices for observers outside the hook
    trace::Writer* trace;    ///< the GPUMEMPROF_TRACE log, or null
    pool::PoolModel* model;  ///< PyTorch's allocator on the same requests (fed in the pool's order), or null
};

/// The stream and pool of the PyTorch event being handled on this thread (0 and the default
/// pool otherwise); PoolEvents writes them, with its own context number, into the trace.
void set_event_origin(std::uint64_t stream, trace::PoolId pool) noexcept;
/// The time (util::CycleClock) of the events this thread reports next, when it reports them
/// later than they happened (the profiler's thread, core/torch_queue.hpp); 0 = now.
void set_event_ticks(std::uint64_t ticks) noexcept;

class PoolEvents final : public pool::PoolListener {
public:
    /// `start`: time zero of the time series and event times (the process start). `history`:
    /// keep the series and the latest events (the HTML report or the snapshot wants them).
    /// `context`: the context's number in the trace (the pool slot's index).
    PoolEvents(int device, const pool::AllocConf& conf, const PoolEventSinks& sinks,
               std::chrono::steady_clock::time_point start, bool history, std::uint64_t context = 0)
        : device_(device), context_(context), conf_(conf), sites_(sinks.sites), ooms_(sinks.ooms), trace_(sinks.trace),
          model_(sinks.model), start_(start), ticks0_(util::CycleClock::now()),
          time0_(std::chrono::steady_clock::now()), history_(history),
          series_(history ? stats::TimeSeries::kDefaultCapacity : 4),
          ring_(history ? stats::EventRing::kDefaultCapacity : 0) {}
    // `site`: the call stack the request was captured with (the pool's RequestSite), 0 for none.
    void on_alloc(std::uintptr_t ptr, std::size_t size, std::size_t requested, std::uintptr_t stream,
                  stacks::StackId site) override;
    void on_free_requested(std::uintptr_t ptr, std::size_t size, std::size_t requested) override;
    void on_free_completed(std::uintptr_t ptr, std::size_t size, std::size_t requested) override;
    void on_segment_alloc(std::uintptr_t ptr, std::size_t size, stacks::StackId site) override;
    void on_segment_free(std::uintptr_t ptr, std::size_t size) override;
    void on_segment_map(std::uintptr_t ptr, std::size_t size, stacks::StackId site) override;
    void on_segment_unmap(std::uintptr_t ptr, std::size_t size) override;
    void on_oom(const pool::OomInfo& info, stacks::StackId site) override;
    /// empty_cache on `pool` (this listener's pool) released reserved bytes down from
    /// `reserved_before`. Called outside the pool's lock: takes it.
    void on_empty_cache(const pool::DevicePool& pool, std::int64_t reserved_before) noexcept;

    /// Copies for the reports (any thread), times in nanoseconds since `start`. `with_lock` runs
    /// its argument under the lock of this listener's pool (DevicePool::with_lock, or the
    /// TorchMirror's).
    using WithLock = std::function<void(const std::function<void()>&)>;
    void history(const WithLock& with_lock, stats::SeriesData* series, std::vector<stats::PoolEvent>* events,
                 std::uint64_t* overwritten) const;
    void history(const pool::DevicePool& pool, stats::SeriesData* series, std::vector<stats::PoolEvent>* events,
                 std::uint64_t* overwritten) const {
        history([&](const std::function<void()>& fn) { pool.with_lock(fn); }, series, events, overwritten);
    }

private:
    /// Event times are CPU time-stamp-counter ticks since construction (util::CycleClock: cheaper
    /// to read than the steady clock): converted to nanoseconds when copied out.
    std::int64_t now_ticks() const;
    /// One pool event: series change(s) and the ring (only with history_ on).
    /// A segment allocated or pages mapped (charged to the requesting stack), or given back.
    void device_memory_acquired(trace::EventType type, stats::PoolAction action, std::uintptr_t ptr, std::size_t size,
                                stacks::StackId site);
    void device_memory_released(trace::EventType type, stats::PoolAction action, std::uintptr_t ptr, std::size_t size);
    void remember(stats::PoolAction action, std::uint64_t addr, std::uint64_t size, std::uint64_t block_size,
                  std::uint64_t stream, stacks::StackId site, stats::Series s, std::int64_t delta,
                  stats::Series s2 = stats::Series::allocated, std::int64_t delta2 = 0) noexcept;

    /// This thread's event origin with this listener's context.
    EventOrigin origin() const noexcept;
    void traced(trace::EventType type, int device, std::uintptr_t ptr, std::size_t size, std::size_t block_size,
                std::uint64_t stack, std::uint64_t device_free, std::uint64_t largest_free);

    int device_;
    std::uint64_t context_;
    const pool::AllocConf& conf_;
    stacks::Recorder& sites_;
    OomNotices& ooms_;
    trace::Writer* trace_;
    pool::PoolModel* model_;
    std::chrono::steady_clock::time_point start_;
    std::uint64_t ticks0_;
    std::chrono::steady_clock::time_point time0_;
    bool history_;
    // The history: changed only under the pool's lock, read under it (DevicePool::with_lock).
    stats::TimeSeries series_;
    stats::EventRing ring_;
};

} // namespace gpumemprof::core
