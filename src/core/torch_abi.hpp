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
    // vtable slots (index of the function pointer; the two destructors are 0 and 1)
    int slot_get_device_stats = 0;     ///< DeviceStats getDeviceStats(DeviceIndex)
    int slot_attach_trace_tracker = 0; ///< void attachAllocatorTraceTracker(AllocatorTraceTracker)
    int slot_name = 0;                 ///< std::string name()
    int vtable_functions = 0;          ///< slots in CUDAAllocator's part of the vtable
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
};

/// Read off torch 2.11.0+cu130's headers with GCC on x86-64 (docs/results/torch-2.11-abi-2026-12-01.txt).
inline constexpr Layout kLayouts[] = {
    {2,
     11,
     /*slots*/ 9,
     44,
     49,
     50,
     /*TraceEntry*/ 0,
     4,
     8,
     32,
     40,
     48,
     /*actions*/ {0, 1, 2, 3, 4, 5, 6, 7, 8},
     /*DeviceStats*/ 976,
     864,
     872,
     880,
     912,
     944,
     952,
     960,
     968,
     /*AcceleratorAllocatorConfig*/ 8,
     56},
};

/// The layout of PyTorch major.minor, or null.
inline const Layout* layout_for(int major, int minor) {
    for (const Layout& l : kLayouts)
        if (l.major == major && l.minor == minor)
            return &l;
    return nullptr;
}

} // namespace gpumemprof::core::torch_abi
