// SPDX-License-Identifier: MIT
// PyTorch's own caching allocator, seen from outside: its segments and blocks rebuilt from the
// events its trace trackers receive (c10::CachingDeviceAllocator::TraceEntry), with the
// statistics of torch.cuda.memory_stats() kept by PyTorch's own update rules.
//
// The events say where a block was handed out and how many bytes were requested, not how large
// the block is: that follows from the free block the address falls in and PyTorch's rounding and
// split rules (round_size, should_split), which this class applies, with the settings PyTorch
// runs with. Blocks merge with free neighbours of their segment when a free completes
// (try_merge_blocks). An event that does not fit the rebuilt layout is counted
// (`mismatches()`) and absorbed; it never throws and never stops the mirror.
//
// Nouns as in PyTorch: a *segment* is one cudaMalloc (or, with expandable segments, the mapped
// part of one reserved range: one per stream, pool and private pool); a *block* is a piece of a
// segment; a *pending* block was freed by the program (FREE_REQUESTED) but is still in use on
// another stream (record_stream) until FREE_COMPLETED. Private pools (CUDA graphs, MemPool) are
// named by PyTorch's MempoolId_t; (0, 0) is the default pool.
#pragma once

#include "pool/alloc_conf.hpp"
#include "pool/device_pool.hpp"
#include "stats/device_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace gpumemprof::pool {

/// PyTorch's MempoolId_t: (0, 0) is the device's default pool; a CUDA graph capture's private
/// pool has first != 0, a torch.cuda.MemPool's second != 0.
struct MempoolId {
    std::uint64_t first = 0;
    std::uint64_t second = 0;
    bool is_default() const { return first == 0 && second == 0; }
    auto operator<=>(const MempoolId&) const = default;
};

/// What one private pool holds now and held at most (reserved: its segments' bytes).
struct PrivatePoolBytes {
    MempoolId id;
    std::int64_t reserved = 0;
    std::int64_t allocated = 0;
    std::int64_t peak_reserved = 0;
    std::int64_t peak_allocated = 0;
};

struct TorchRules {
    /// The settings PyTorch's allocator runs with (PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF):
    /// max_split_size, expandable_segments and, unless `divisions` is set, the rounding divisions.
    AllocConf conf;
    /// PyTorch's own c10::CachingAllocator::AcceleratorAllocatorConfig::roundup_power2_divisions
    /// when it can be called (it follows changes the program makes at run time), else null.
    std::size_t (*divisions)(std::size_t) = nullptr;
    /// PyTorch's own max_split_size and expandable-segments setting, read at each use when set
    /// (the program may change them while it runs), else `conf`'s.
    std::function<std::size_t()> max_split_size;
    std::function<bool()> expandable_segments;
};

class TorchMirror {
public:
    /// `listener` (may be null) hears every change in the order PyTorch made it, under this
    /// mirror's lock, as it would from a DevicePool.
    TorchMirror(TorchRules rules, PoolListener* listener);
    ~TorchMirror();
    TorchMirror(const TorchMirror&) = delete;
    TorchMirror& operator=(const TorchMirror&) = delete;

    // ---- PyTorch's trace events, in its order (one device) -----------------------------------
    // `site`: handed to the listener with the event (RequestSite, as DevicePool::malloc's).
    void segment_alloc(std::uintptr_t addr, std::size_t size, std::uintptr_t stream, MempoolId pool,
                       RequestSite site = 0);
    void segment_free(std::uintptr_t addr, std::size_t size);
    /// Expandable segments: pages mapped at [addr, addr + size) / given back.
    void segment_map(std::uintptr_t addr, std::size_t size, std::uintptr_t stream, MempoolId pool,
                     RequestSite site = 0);
    void segment_unmap(std::uintptr_t addr, std::size_t size);
    /// Returns the size of the block handed out (0 when the event did not fit).
    std::size_t alloc(std::uintptr_t addr, std::size_t requested, std::uintptr_t stream, MempoolId pool,
                      RequestSite site = 0);
    void free_requested(std::uintptr_t addr);
    void free_completed(std::uintptr_t addr);
    /// PyTorch is about to raise an out-of-memory error for a request rounded to `rounded`.
    void oom(std::size_t device_free, std::size_t rounded, std::uintptr_t stream, RequestSite site = 0);

    // ---- what the reports read (any thread) --------------------------------------------------
    stats::DeviceStats stats() const;
    /// Counters that change on calls that leave no trace event (synchronize_and_free_events,
    /// the retry after releasing every cached block): taken from PyTorch's own figures when the
    /// caller could read them.
    void set_untraced_counters(std::int64_t num_alloc_retries, std::int64_t num_sync_all_streams);
    /// Our own resets (the C API): of everything the mirror keeps.
    void reset_peak_stats();
    void reset_accumulated_stats();
    /// The program reset PyTorch's statistics (torch.cuda.reset_peak_memory_stats, ...): stats()
    /// follows, as torch.cuda.memory_stats() does; whole_run_stats() keeps the whole run.
    void program_reset_peak();
    void program_reset_accumulated();
    /// stats() with peaks and totals over the whole run, whatever the program reset.
    stats::DeviceStats whole_run_stats() const;
    int program_resets() const;
    ReservedPeak reserved_peak() const;
    /// Segments and blocks in address order, as PyTorch's snapshot() shows them (expandable
    /// segments: one entry per contiguous mapped range).
    std::vector<SegmentInfo> snapshot() const;
    /// Private pools (id != (0, 0)) that ever held memory.
    std::vector<PrivatePoolBytes> private_pools() const;
    /// The block at `addr` if one is allocated or pending there.
    Lookup lookup(std::uintptr_t addr) const;
    /// Events that did not fit the rebuilt layout (an allocation where no free block starts, a
    /// free of an unknown address, ...): 0 when the mirror agrees with PyTorch's allocator.
    std::int64_t mismatches() const;
    /// The largest free block (PyTorch's cacheInfo), for OOM reports.
    std::size_t largest_free_block() const;
    /// Runs fn under the mirror's lock (its listener's state changes only under it).
    void with_lock(const std::function<void()>& fn) const;
    /// The process is a fork child: the parent's state means nothing here.
    void lock_for_fork();
    void unlock_after_fork();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace gpumemprof::pool
