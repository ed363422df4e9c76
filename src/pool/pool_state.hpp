// SPDX-License-Identifier: MIT
// What the parts of one DevicePool share: the backend, the settings as the policy reads them, the
// listener, the torch statistics and the pool's own counters, and the block store. Owned by
// DevicePool; every part holds a reference; all under the pool's lock.
#pragma once

#include "pool/block_store.hpp"
#include "pool/device_pool.hpp"
#include "stats/device_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

namespace gpumemprof::pool::detail {

struct PoolState {
    PoolState(Backend& b, PoolOptions o, PoolListener* l) : backend(b), options(std::move(o)), listener(l) {
        max_split_size = options.conf.max_split_size;
        max_non_split_rounding = options.conf.max_non_split_rounding_size;
        set_fraction = options.conf.per_process_memory_fraction > 0.0;
        gc_enabled = set_fraction && options.conf.garbage_collection_threshold > 0.0;
        expandable = options.conf.expandable_segments && options.mode == Mode::caching;
        // torch: static_cast<int64_t>(max_split_size); SIZE_MAX reads -1.
        st.max_split_size = static_cast<std::int64_t>(max_split_size);
    }

    Backend& backend;
    const PoolOptions options;
    PoolListener* const listener;

    BlockStore store;
    stats::DeviceStats st;
    std::int64_t invalid_frees = 0;
    PoolCounters counters;
    ReservedPeak reserved_peak;
    PendingStats pending;                   ///< blocks waiting for a fence (PendingFrees keeps them)
    std::size_t total_allocated_memory = 0; ///< bytes held from the backend (== reserved)

    std::size_t max_split_size = 0;
    std::size_t max_non_split_rounding = 0;
    bool set_fraction = false;
    bool gc_enabled = false;
    /// Every segment of the pool is expandable (expandable_segments:True, caching mode), or none.
    bool expandable = false;
    bool allowed_known = false;
    std::size_t allowed_memory_maximum = std::numeric_limits<std::size_t>::max();

    /// BlockStore::ensure_spares for this call: every pending block may be retired by it.
    void ensure_spares() { store.ensure_spares(static_cast<std::size_t>(pending.blocks.current)); }

    /// The stat types a block of `p` counts in: all, and its pool's.
    template <typename F> static void for_types(const BlockPool& p, F&& f) {
        f(stats::kAll);
        f(p.stat_type);
    }

    /// per_process_memory_fraction x the device's total (asked once).
    std::size_t allowed() {
        if (!allowed_known) {
            std::size_t free_b = 0, total_b = 0;
            if (backend.memory_info(&free_b, &total_b) == kSuccess)
                allowed_memory_maximum =
                    static_cast<std::size_t>(options.conf.per_process_memory_fraction * static_cast<double>(total_b));
            allowed_known = true; // on failure stay unlimited rather than ask on every miss
        }
        return allowed_memory_maximum;
    }

    void note_driver_error(int code) {
        try {
            ++counters.driver_errors[code];
        } catch (...) {
            ++counters.host_failures;
        }
    }

    /// The figures a ReservedPeak keeps, as they are now.
    ReservedPeak moment() const {
        return ReservedPeak{st.reserved_bytes[stats::kAll].current, st.allocated_bytes[stats::kAll].current,
                            st.inactive_split_bytes[stats::kAll].current};
    }

    /// After a request: if reserved bytes have just exceeded every earlier value, remember the
    /// pool's state now (ReservedPeak). Reserved bytes only grow inside a request.
    void note_reserved_peak() {
        if (st.reserved_bytes[stats::kAll].current > reserved_peak.reserved)
            reserved_peak = moment();
    }
};

} // namespace gpumemprof::pool::detail
