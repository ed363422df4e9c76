// SPDX-License-Identifier: MIT
// torch.cuda.memory_stats() for one device: the same keys and the same update rules.
#pragma once

#include "stats/stat_fields.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::stats {

/// {current, peak, allocated, freed}, as c10::CachingDeviceAllocator::Stat.
struct Stat {
    std::int64_t current = 0;
    std::int64_t peak = 0;
    std::int64_t allocated = 0;
    std::int64_t freed = 0;

    // Inline: ten of these run under the pool's lock per allocation and per free.
    /// As c10::CachingDeviceAllocator::Stat::increase: peak follows current, allocated counts
    /// every increase.
    void increase(std::int64_t amount) {
        current += amount;
        peak = current > peak ? current : peak;
        allocated += amount;
    }
    /// Stat::decrease: peak is untouched, freed counts every decrease.
    void decrease(std::int64_t amount) {
        current -= amount;
        freed += amount;
    }
    void reset_peak() { peak = current; }
    void reset_accumulated() { allocated = freed = 0; }
    bool operator==(const Stat&) const = default;
};

enum StatType : int { kAll = 0, kSmallPool = 1, kLargePool = 2, kNumStatTypes = 3 };
using StatArray = std::array<Stat, kNumStatTypes>;

/// The members are generated from the field list (stats/stat_fields.hpp).
struct DeviceStats {
#define X(name) StatArray name{};
    GPUMEMPROF_STAT_ARRAYS(X)
#undef X
#define X(name) Stat name{};
    GPUMEMPROF_STAT_SINGLES(X)
#undef X
#define X(name) std::int64_t name = 0;
    GPUMEMPROF_STAT_COUNTERS(X)
#undef X
    // Constants are -1 until set (max_split_size: -1 when unlimited, as torch reports it).
#define X(name) std::int64_t name = -1;
    GPUMEMPROF_STAT_CONSTANTS(X)
#undef X

    /// fn(Stat&) for every Stat: each element of the arrays, then the single ones.
    template <typename Fn> void for_each_stat(Fn&& fn) {
#define X(name)                                                                                                        \
    for (Stat & s : name)                                                                                              \
        fn(s);
        GPUMEMPROF_STAT_ARRAYS(X)
#undef X
#define X(name) fn(name);
        GPUMEMPROF_STAT_SINGLES(X)
#undef X
    }

    void reset_peak();
    void reset_accumulated();
    bool operator==(const DeviceStats&) const = default;
};

/// The flat key/value list torch.cuda.memory_stats() returns, sorted by key
/// (e.g. {"active.all.allocated", 3}, ...): 122 entries.
std::vector<std::pair<std::string, std::int64_t>> flatten(const DeviceStats& stats);

/// `flatten` rendered as one JSON object {"key": int, ...} in key order.
std::string to_json(const DeviceStats& stats);

} // namespace gpumemprof::stats
