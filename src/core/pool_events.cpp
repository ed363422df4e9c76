// SPDX-License-Identifier: MIT
#include "core/pool_events.hpp"

#include "core/device_accounting.hpp"
#include "core/oom_notices.hpp"
#include "report/oom_advice.hpp"
#include "stacks/recorder.hpp"
#include "trace/writer.hpp"
#include "util/byte_format.hpp"
#include "util/log.hpp"
#include "util/swallowed.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace gpumemprof::core {
namespace {

// The pool's request sites are our call-stack ids, handed through unchanged.
static_assert(std::is_same_v<pool::RequestSite, stacks::StackId>);

// initial-exec: a plain %fs-relative access (the library is preloaded, so its TLS is static),
// where the default model calls __tls_get_addr at each use.
thread_local std::uint64_t t_event_stream __attribute__((tls_model("initial-exec"))) = 0;
thread_local trace::PoolId t_event_pool __attribute__((tls_model("initial-exec"))) = trace::kDefaultPool;
thread_local std::uint64_t t_event_ticks __attribute__((tls_model("initial-exec"))) = 0;

} // namespace

void set_event_origin(std::uint64_t stream, trace::PoolId pool) noexcept {
    t_event_stream = stream;
    t_event_pool = pool;
}
void set_event_ticks(std::uint64_t ticks) noexcept {
    t_event_ticks = ticks;
}
std::int64_t PoolEvents::now_ticks() const {
    const std::uint64_t t = t_event_ticks != 0 ? t_event_ticks : util::CycleClock::now();
    return static_cast<std::int64_t>(t - ticks0_);
}
EventOrigin PoolEvents::origin() const noexcept {
    return EventOrigin{t_event_stream, context_, t_event_pool};
}

// The trace's copy of an event, when there is a trace: the origin is read only then.
inline __attribute__((always_inline)) void PoolEvents::traced(trace::EventType type, int device, std::uintptr_t ptr,
                                                              std::size_t size, std::size_t block_size,
                                                              std::uint64_t stack, std::uint64_t device_free,
                                                              std::uint64_t largest_free) {
    if (trace_) [[unlikely]]
        emit_to(trace_, type, device, ptr, size, block_size, stack, device_free, largest_free, origin());
}

// Inlined into each caller, where the action, the series and the deltas' signs are constants:
// an event then costs no call, only the ring's copy and the series' changes.
inline __attribute__((always_inline)) void PoolEvents::remember(stats::PoolAction action, std::uint64_t addr,
                                                                std::uint64_t size, std::uint64_t block_size,
                                                                std::uint64_t stream, stacks::StackId site,
                                                                stats::Series s, std::int64_t delta, stats::Series s2,
                                                                std::int64_t delta2) noexcept {
    if (!history_)
        return;
    try {
        const std::int64_t t = now_ticks();
        // Only allocations and frees reach the model, so only they can change its reserved bytes.
        const bool model_changed =
            model_ && (action == stats::PoolAction::alloc || action == stats::PoolAction::free_requested);
        if (delta)
            series_.add(t, s, delta);
        if (delta2)
            series_.add(t, s2, delta2);
        if (model_changed)
            series_.set(t, stats::Series::model_reserved, static_cast<std::int64_t>(model_->reserved_bytes()));
        stats::PoolEvent e;
        e.t_ns = t;
        e.action = action;
        e.addr = addr;
        e.size = size;
        e.block_size = block_size;
        e.stream = stream;
        e.site = site;
        ring_.push(e);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

// The series count a block by the bytes it occupies in the pool (its rounded size), as
// allocated_bytes does; the events carry the size the program asked for, as PyTorch's trace does.
void PoolEvents::on_alloc(std::uintptr_t ptr, std::size_t size, std::size_t requested, std::uintptr_t stream,
                          stacks::StackId site) {
    sites_.on_alloc(device_, ptr, size, requested, site);
    if (model_)
        model_->on_alloc(ptr, requested, stream);
    traced(trace::EventType::alloc, device_, ptr, requested, size, site, 0, 0);
    remember(stats::PoolAction::alloc, ptr, requested, size, stream, site, stats::Series::allocated,
             static_cast<std::int64_t>(size));
}

void PoolEvents::on_free_requested(std::uintptr_t ptr, std::size_t size, std::size_t requested) {
    const stacks::StackId site = sites_.on_free(device_, ptr);
    if (model_)
        model_->on_free(ptr);
    traced(trace::EventType::free_requested, device_, ptr, requested, size, 0, 0, 0);
    // Freed but not yet reusable: out of allocated, into waiting until free_completed.
    remember(stats::PoolAction::free_requested, ptr, requested, size, 0, site, stats::Series::allocated,
             -static_cast<std::int64_t>(size), stats::Series::waiting, static_cast<std::int64_t>(size));
}

void PoolEvents::on_free_completed(std::uintptr_t ptr, std::size_t size, std::size_t requested) {
    traced(trace::EventType::free_completed, device_, ptr, requested, size, 0, 0, 0);
    remember(stats::PoolAction::free_completed, ptr, requested, size, 0, 0, stats::Series::waiting,
             -static_cast<std::int64_t>(size));
}

void PoolEvents::device_memory_acquired(trace::EventType type, stats::PoolAction action, std::uintptr_t ptr,
                                        std::size_t size, stacks::StackId site) {
    sites_.on_acquire(device_, size, site);
    note_device_memory_acquired(device_);
    traced(type, device_, ptr, size, size, 0, 0, 0);
    remember(action, ptr, size, size, 0, site, stats::Series::reserved, static_cast<std::int64_t>(size));
}

void PoolEvents::device_memory_released(trace::EventType type, stats::PoolAction action, std::uintptr_t ptr,
                                        std::size_t size) {
    note_device_memory_released(device_);
    traced(type, device_, ptr, size, size, 0, 0, 0);
    remember(action, ptr, size, size, 0, 0, stats::Series::reserved, -static_cast<std::int64_t>(size));
}

void PoolEvents::on_segment_alloc(std::uintptr_t ptr, std::size_t size, stacks::StackId site) {
    device_memory_acquired(trace::EventType::segment_alloc, stats::PoolAction::segment_alloc, ptr, size, site);
}

void PoolEvents::on_segment_free(std::uintptr_t ptr, std::size_t size) {
    device_memory_released(trace::EventType::segment_free, stats::PoolAction::segment_free, ptr, size);
}

void PoolEvents::on_empty_cache(const pool::DevicePool& pool, std::int64_t reserved_before) noexcept {
    if (!history_)
        return;
    try {
        pool.with_lock([&] {
            const std::int64_t t = now_ticks();
            series_.mark(t, stats::MarkerKind::empty_cache, reserved_before - series_.current(stats::Series::reserved));
            if (model_)
                series_.set(t, stats::Series::model_reserved, static_cast<std::int64_t>(model_->reserved_bytes()));
        });
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void PoolEvents::history(const WithLock& with_lock, stats::SeriesData* series, std::vector<stats::PoolEvent>* events,
                         std::uint64_t* overwritten) const {
    with_lock([&] {
        *series = series_.data();
        *events = ring_.events();
        *overwritten = ring_.overwritten();
    });
    // One conversion for both (the peak marker and the event of the same moment agree).
    const auto ticks = static_cast<double>(util::CycleClock::now() - ticks0_);
    const double elapsed_ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - time0_).count();
    const double ns_per_tick = ticks > 0 ? elapsed_ns / ticks : 1.0;
    const double offset_ns = std::chrono::duration<double, std::nano>(time0_ - start_).count();
    auto ns = [&](std::int64_t t) {
        return static_cast<std::int64_t>(offset_ns + static_cast<double>(t) * ns_per_tick);
    };
    for (stats::SeriesBucket& b : series->buckets) {
        b.t0_ns = ns(b.t0_ns);
        b.t1_ns = ns(b.t1_ns);
    }
    series->bucket_ns = static_cast<std::int64_t>(static_cast<double>(series->bucket_ns) * ns_per_tick);
    if (series->peak_allocated_t_ns >= 0)
        series->peak_allocated_t_ns = ns(series->peak_allocated_t_ns);
    if (series->peak_reserved_t_ns >= 0)
        series->peak_reserved_t_ns = ns(series->peak_reserved_t_ns);
    for (stats::SeriesMarker& m : series->markers)
        m.t_ns = ns(m.t_ns);
    for (stats::PoolEvent& e : *events)
        e.t_ns = ns(e.t_ns);
}

void PoolEvents::on_segment_map(std::uintptr_t ptr, std::size_t size, stacks::StackId site) {
    device_memory_acquired(trace::EventType::vmm_map, stats::PoolAction::segment_map, ptr, size, site);
}

void PoolEvents::on_segment_unmap(std::uintptr_t ptr, std::size_t size) {
    device_memory_released(trace::EventType::vmm_unmap, stats::PoolAction::segment_unmap, ptr, size);
}

void PoolEvents::on_oom(const pool::OomInfo& info, stacks::StackId site) {
    std::string suggestion = report::oom_suggestion(info, conf_);
    log::warn("{} (request: {} bytes) Suggestion: {}", report::oom_message(device_, info), info.requested, suggestion);
    note_oom(device_, sites_.on_oom(device_, info, site, suggestion), info.device_free, info.device_total);
    ooms_.add(OomNotice{device_, static_cast<std::int64_t>(info.requested), info.allocated,
                        static_cast<std::int64_t>(info.device_free)});
    traced(trace::EventType::oom, device_, 0, info.requested, info.allocation_size, site, info.device_free,
           info.largest_free_block);
    if (history_) {
        try {
            const std::int64_t t = now_ticks();
            series_.mark(t, stats::MarkerKind::oom, static_cast<std::int64_t>(info.requested));
            stats::PoolEvent e;
            e.t_ns = t;
            e.action = stats::PoolAction::oom;
            e.addr = info.device_free;
            e.size = info.requested;
            e.block_size = info.rounded;
            e.site = site;
            ring_.push(e);
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
    }
}

} // namespace gpumemprof::core
