// SPDX-License-Identifier: MIT
// torch.cuda.memory_stats() for one device: the same keys and the same update rules.
#pragma once

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

    void increase(std::int64_t amount);
    void decrease(std::int64_t amount);
    void reset_peak() { peak = current; }
    void reset_accumulated() { allocated = freed = 0; }
    bool operator==(const Stat&) const = default;
};

enum StatType : int { kAll = 0, kSmallPool = 1, kLargePool = 2, kNumStatTypes = 3 };
using StatArray = std::array<Stat, kNumStatTypes>;

struct DeviceStats {
    StatArray allocation{};
    StatArray segment{};
    StatArray active{};
    StatArray inactive_split{};
    StatArray allocated_bytes{};
    StatArray reserved_bytes{};
    StatArray active_bytes{};
    StatArray inactive_split_bytes{};
    StatArray requested_bytes{};
    Stat oversize_allocations{};
    Stat oversize_segments{};
    std::int64_t num_alloc_retries = 0;
    std::int64_t num_ooms = 0;
    std::int64_t num_sync_all_streams = 0;
    std::int64_t num_device_alloc = 0;
    std::int64_t num_device_free = 0;
    /// -1 when unlimited, as torch reports it.
    std::int64_t max_split_size = -1;

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
