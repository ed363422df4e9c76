// SPDX-License-Identifier: MIT
// What the library knows of PyTorch's allocator interface, per PyTorch version: the vtable slots
// of c10::cuda::CUDACachingAllocator::CUDAAllocator it calls, and the layouts of
// c10::CachingDeviceAllocator::TraceEntry and DeviceStats it reads. PyTorch's own headers are the
// truth: scripts/gpu/check_torch_layouts.py compiles a probe against an installed torch's headers
// and compares every number here with what that compiler lays out (docs/design.md, "PyTorch").
// A version not in the table is not attached to (one warning; its segments are still seen).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumemprof::core::torch_abi {

/// The exported `std::atomic<CUDAAllocator*> c10::cuda::CUDACachingAllocator::allocator` of
/// libc10_cuda.so, and PyTorch's rounding divisions (libc10.so).
inline constexpr const char* kAllocatorSymbol = "_ZN3c104cuda20CUDACachingAllocator9allocatorE";
inline constexpr const char* kDivisionsSymbol =
    "_ZN3c1016CachingAllocator26AcceleratorAllocatorConfig24roundup_power2_divisionsEm";
/// AcceleratorAllocatorConfig& AcceleratorAllocatorConfig::instance() (libc10.so).
inline constexpr const char* kConfigInstanceSymbol = "_ZN3c1016CachingAllocator26AcceleratorAllocatorConfig8instanceEv";

/// TraceEntry::Action values.
struct Actions {
    int alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, snapshot, oom;
};

struct Layout {
    int major = 0, minor = 0;
    // vtable slots of CUDAAllocator (index of the function pointer; the destructors are 0 and 1)
    int slot_get_device_stats = 0;     ///< DeviceStats getDeviceStats(DeviceIndex)
    int slot_attach_trace_tracker = 0; ///< void attachAllocatorTraceTracker(AllocatorTraceTracker)
    int slot_name = 0;                 ///< std::string name()
    int slot_empty_cache = 0;          ///< void emptyCache(MempoolId_t)
    int slot_reset_accumulated = 0;    ///< void resetAccumulatedStats(DeviceIndex)
    int slot_reset_peak = 0;           ///< void resetPeakStats(DeviceIndex)
    // TraceEntry: byte offsets of the fields read
    std::size_t entry_action = 0, entry_device = 0, entry_addr = 0, entry_stream = 0, entry_size = 0, entry_mempool = 0;
    Actions actions{};
    // DeviceStats: its nine StatArrays come first, in our order (stats/stat_fields.hpp), 96 bytes each
    std::size_t stats_bytes = 0;
    std::size_t stats_num_alloc_retries = 0, stats_num_ooms = 0, stats_oversize_allocations = 0,
                stats_oversize_segments = 0, stats_num_sync_all_streams = 0, stats_num_device_alloc = 0,
                stats_num_device_free = 0, stats_max_split_size = 0;
    // AcceleratorAllocatorConfig: std::atomic<size_t> max_split_size_, std::atomic<bool>
    // use_expandable_segments_
    std::size_t config_max_split_size = 0, config_expandable_segments = 0;
    // torch::autograd::Node: uint64_t sequence_nr_ and thread_id_ (the forward op that made it)
    std::size_t node_sequence_nr = 0, node_thread_id = 0;
};

/// Read off torch 2.11.0+cu130's headers with GCC 13 on x86-64, H200 machine, 2026-12-01
/// (docs/results/torch-2.11-abi-2026-12-01.txt).
inline constexpr Layout kLayouts[] = {
    {.major = 2,
     .minor = 11,
     .slot_get_device_stats = 9,
     .slot_attach_trace_tracker = 44,
     .slot_name = 49,
     .slot_empty_cache = 7,
     .slot_reset_accumulated = 10,
     .slot_reset_peak = 11,
     .entry_action = 0,
     .entry_device = 4,
     .entry_addr = 8,
     .entry_stream = 32,
     .entry_size = 40,
     .entry_mempool = 48,
     .actions = {0, 1, 2, 3, 4, 5, 6, 7, 8},
     .stats_bytes = 976,
     .stats_num_alloc_retries = 864,
     .stats_num_ooms = 872,
     .stats_oversize_allocations = 880,
     .stats_oversize_segments = 912,
     .stats_num_sync_all_streams = 944,
     .stats_num_device_alloc = 952,
     .stats_num_device_free = 960,
     .stats_max_split_size = 968,
     .config_max_split_size = 8,
     .config_expandable_segments = 56,
     .node_sequence_nr = 24,
     .node_thread_id = 48},
};

/// The layout of PyTorch major.minor, or null.
inline const Layout* layout_for(int major, int minor) {
    for (const Layout& l : kLayouts)
        if (l.major == major && l.minor == minor)
            return &l;
    return nullptr;
}

} // namespace gpumemprof::core::torch_abi
