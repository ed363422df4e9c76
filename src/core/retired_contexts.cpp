// SPDX-License-Identifier: MIT
#include "core/retired_contexts.hpp"

#include <algorithm>

namespace gpumemprof::core {
namespace {

void fold_stat(stats::Stat& into, const stats::Stat& s) {
    into.current += s.current;
    into.peak = std::max(into.peak, s.peak);
    into.allocated += s.allocated;
    into.freed += s.freed;
}

void fold_stats(stats::DeviceStats& into, const stats::DeviceStats& s) {
#define X(name)                                                                                                        \
    for (int i = 0; i < stats::kNumStatTypes; ++i)                                                                     \
        fold_stat(into.name[i], s.name[i]);
    GPUMEMPROF_STAT_ARRAYS(X)
#undef X
#define X(name) fold_stat(into.name, s.name);
    GPUMEMPROF_STAT_SINGLES(X)
#undef X
#define X(name) into.name += s.name;
    GPUMEMPROF_STAT_COUNTERS(X)
#undef X
#define X(name) into.name = s.name;
    GPUMEMPROF_STAT_CONSTANTS(X)
#undef X
}

void fold_counters(pool::PoolCounters& into, const pool::PoolCounters& c) {
    into.fences_recorded += c.fences_recorded;
    into.fence_polls += c.fence_polls;
    into.misses += c.misses;
    into.deferred_frees += c.deferred_frees;
    into.fence_waits += c.fence_waits;
    into.wait_timeouts += c.wait_timeouts;
    into.wait_ns += c.wait_ns;
    into.fence_ns += c.fence_ns;
    into.poll_ns += c.poll_ns;
    into.host_failures += c.host_failures;
    for (const auto& [code, count] : c.driver_errors)
        into.driver_errors[code] += count;
}

void fold_peak(pool::ReservedPeak& into, const pool::ReservedPeak& p) {
    if (p.reserved > into.reserved)
        into = p;
}

} // namespace

void fold_summary(report::DeviceSummary& into, const report::DeviceSummary& d) {
    if (into.folded_contexts == 0) {
        into.device = d.device;
        into.allocator = d.allocator;
        into.total_capacity = d.total_capacity;
        into.stats.max_split_size = d.stats.max_split_size;
        into.context_alive = false;
    }
    into.folded_contexts += 1;
    into.context = std::max(into.context, d.context);
    fold_stats(into.stats, d.stats);
    into.invalid_frees += d.invalid_frees;
    into.ipc_refused += d.ipc_refused;
    if (d.kernel_fault != 0)
        into.kernel_fault = d.kernel_fault;
    fold_counters(into.pool_counters, d.pool_counters);
    into.total_capacity = std::max(into.total_capacity, d.total_capacity);
    fold_peak(into.at_reserved_peak, d.at_reserved_peak);
    fold_stat(into.pending.bytes, d.pending.bytes);
    fold_stat(into.pending.blocks, d.pending.blocks);
    if (d.has_model) {
        into.has_model = true;
        fold_stats(into.model, d.model);
        into.model_unserved += d.model_unserved;
        fold_peak(into.model_at_reserved_peak, d.model_at_reserved_peak);
    }
}

void RetiredContexts::fold(const report::DeviceSummary& d) {
    fold_summary(entries_[d.device], d);
}

} // namespace gpumemprof::core
