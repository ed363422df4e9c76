// SPDX-License-Identifier: MIT
// The parts of torch 2.11's allocator interface that core/torch_abi.hpp reads, declared under
// PyTorch's own names (so their symbols and layouts are PyTorch's), for the stand-in libraries.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace c10::CachingAllocator {

class AcceleratorAllocatorConfig {
public:
    static AcceleratorAllocatorConfig& instance();
    static size_t roundup_power2_divisions(size_t size);
    std::atomic<size_t> large_segment_size_{20971520};
    std::atomic<size_t> max_split_size_{SIZE_MAX};
    std::atomic<size_t> max_non_split_rounding_size_{20971520};
    std::vector<size_t> roundup_power2_divisions_;
    std::atomic<double> garbage_collection_threshold_{0};
    std::atomic<bool> use_expandable_segments_{false};
};

} // namespace c10::CachingAllocator

namespace faketorch {

using MempoolId = std::pair<unsigned long long, unsigned long long>;

struct TraceEntry {
    enum Action {
        ALLOC,
        FREE_REQUESTED,
        FREE_COMPLETED,
        SEGMENT_ALLOC,
        SEGMENT_FREE,
        SEGMENT_MAP,
        SEGMENT_UNMAP,
        SNAPSHOT,
        OOM
    };
    Action action_;
    std::int8_t device_;
    size_t addr_;
    std::shared_ptr<void> context_;
    void* stream_{};
    size_t size_;
    MempoolId mempool_;
    std::uint64_t time_{};
    std::string compile_context_;
    std::string user_metadata_;
};
static_assert(sizeof(TraceEntry) == 136, "torch 2.11's TraceEntry");

struct Stat {
    std::int64_t current = 0, peak = 0, allocated = 0, freed = 0;
};
using StatArray = std::array<Stat, 3>;

/// torch 2.11's c10::CachingDeviceAllocator::DeviceStats, member for member.
struct DeviceStats {
    StatArray allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
        inactive_split_bytes, requested_bytes;
    std::int64_t num_alloc_retries = 0;
    std::int64_t num_ooms = 0;
    Stat oversize_allocations;
    Stat oversize_segments;
    std::int64_t num_sync_all_streams = 0;
    std::int64_t num_device_alloc = 0;
    std::int64_t num_device_free = 0;
    std::int64_t max_split_size = 0;
};
static_assert(sizeof(DeviceStats) == 976, "torch 2.11's DeviceStats");

} // namespace faketorch
