// SPDX-License-Identifier: MIT
// One device's (one context's) caching pool with the policy of PyTorch's native CUDA caching
// allocator (DeviceCachingAllocator): rounding, small/large pools, best fit per stream,
// split/merge, oversize blocks, garbage collection, release-and-retry. Thread-safe: one mutex.
//
// Nouns: a *segment* is one piece of memory obtained from the Backend; a *block* is a
// contiguous part of a segment, free or handed out; a *pending* block was freed by the program
// but may still be touched by device work queued before the free, so it waits for a fence
// (PyTorch's "active_pending_free" state) before it can be reused.
#pragma once

#include "pool/alloc_conf.hpp"
#include "pool/backend.hpp"
#include "stats/device_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::pool {

enum class Mode {
    caching,     ///< PyTorch policy.
    passthrough, ///< No cache: every malloc is one segment of max(size, 1) rounded up to 512 B,
                 ///< every free releases it at once (defer_frees ignored). Stats still kept
                 ///< (allocation == segment). For GPUMEMPROF_POOL=0.
};

struct PoolOptions {
    AllocConf conf;
    Mode mode = Mode::caching;
    /// true: a freed block waits for a fence before reuse (live driver, cudaFree semantics)
    /// unless Backend::frees_ordered() says reuse at once is safe now.
    /// false: a freed block is reusable at once, exactly as PyTorch's same-stream reuse
    /// (replay and unit tests).
    bool defer_frees = true;
    /// With defer_frees: reuse at once while Backend::frees_ordered() (GPUMEMPROF_REUSE=auto).
    /// false: always wait for a fence (GPUMEMPROF_REUSE=fenced).
    bool reuse_when_ordered = true;
    int device = 0;
};

/// What the pool knew at the moment an allocation failed (PyTorch's OOM message inputs).
struct OomInfo {
    std::size_t requested = 0;       ///< the caller's size
    std::size_t rounded = 0;         ///< round_size(requested)
    std::size_t allocation_size = 0; ///< segment size the pool tried to get
    std::size_t device_free = 0;     ///< Backend::memory_info at the failure
    std::size_t device_total = 0;
    std::int64_t allocated = 0;         ///< allocated_bytes.all.current
    std::int64_t reserved = 0;          ///< reserved_bytes.all.current
    std::size_t largest_free_block = 0; ///< largest cached free block in this pool
    std::size_t allowed = 0;            ///< per-process limit in bytes, 0 when none
    int status = kOutOfMemory;          ///< the code returned to the caller
};

/// The caller's label for one request (the profiler's call-stack id), given to malloc and handed
/// back unchanged to the listener with each event the request causes: its block, the segment or
/// pages obtained for it, its out-of-memory. The pool does nothing else with it; 0: none.
using RequestSite = std::uint32_t;

/// Called under the pool's lock, in the order things happen. Must not call back into the pool.
/// `site`: the RequestSite of the request that caused the event.
class PoolListener {
public:
    virtual ~PoolListener() = default;
    virtual void on_alloc(std::uintptr_t ptr, std::size_t size, std::size_t requested, std::uintptr_t stream,
                          RequestSite site) {}
    virtual void on_free_requested(std::uintptr_t ptr, std::size_t size, std::size_t requested) {}
    virtual void on_free_completed(std::uintptr_t ptr, std::size_t size, std::size_t requested) {}
    virtual void on_segment_alloc(std::uintptr_t ptr, std::size_t size, RequestSite site) {}
    virtual void on_segment_free(std::uintptr_t ptr, std::size_t size) {}
    /// Expandable segments: pages mapped / unmapped at [ptr, ptr + size).
    virtual void on_segment_map(std::uintptr_t ptr, std::size_t size, RequestSite site) {}
    virtual void on_segment_unmap(std::uintptr_t ptr, std::size_t size) {}
    virtual void on_oom(const OomInfo& info, RequestSite site) {}
};

enum class BlockState { active_allocated, active_pending_free, inactive };

struct BlockInfo {
    std::uintptr_t address = 0;
    std::size_t size = 0;
    std::size_t requested_size = 0;
    BlockState state = BlockState::inactive;
};

struct SegmentInfo {
    std::uintptr_t address = 0;
    std::size_t total_size = 0;
    std::size_t allocated_size = 0;
    std::size_t active_size = 0;
    std::size_t requested_size = 0;
    std::uintptr_t stream = 0;
    bool is_small = false;
    bool is_expandable = false;    ///< one contiguous mapped range of an expandable segment
    std::vector<BlockInfo> blocks; ///< address order, sizes sum to total_size
};

/// Result of looking up a pointer that the program holds.
struct Lookup {
    bool in_pool = false;        ///< address lies inside one of this pool's segments
                                 ///< (for expandable ones: segment_* is the mapped range)
    bool is_block_start = false; ///< ... and is the start of an allocated block
    std::uintptr_t segment_base = 0;
    std::size_t segment_size = 0;
    std::uintptr_t block_address = 0;
    std::size_t block_size = 0;
    bool block_allocated = false;    ///< the block holding the address is allocated (not free or pending)
    std::size_t block_requested = 0; ///< ... and the bytes the program asked for
};

/// How the deferred-free machinery behaved (not torch stats; for tuning and reports).
struct PoolCounters {
    std::int64_t fences_recorded = 0; ///< Backend::fence_record calls that produced a fence
    std::int64_t fence_polls = 0;     ///< Backend::fence_done calls
    std::int64_t misses = 0;          ///< requests no cached block could serve
    std::int64_t deferred_frees = 0;  ///< frees whose block had to wait for a fence
    std::int64_t fence_waits = 0;     ///< bounded waits on a miss (Backend::fence_wait_for calls)
    std::int64_t wait_timeouts = 0;   ///< ... of which ran out of time (the pool grew instead)
    std::int64_t wait_ns = 0;         ///< host time spent in those waits
    std::int64_t fence_ns = 0;        ///< host time spent recording fences
    std::int64_t poll_ns = 0;         ///< host time spent polling them (fence_polls)
    /// Requests or frees that failed because host memory ran out for the pool's own bookkeeping
    /// (answered as out-of-memory / invalid value): the statistics no longer describe the device.
    std::int64_t host_failures = 0;
    /// Codes other than out-of-memory the device answered segment requests and releases with
    /// (a device error, a lost context), and how often: each failed request got that code.
    std::map<int, std::int64_t> driver_errors;
};

/// Blocks the program freed that wait for a fence before the pool may hand them out again (the
/// pool's business, not the program's: they are not allocated, active or requested). Reset by
/// reset_peak_stats() / reset_accumulated_stats() as the torch stats are.
struct PendingStats {
    stats::Stat bytes;
    stats::Stat blocks;
};

/// The pool at the moment its reserved bytes first reached their peak (right after the request
/// that took them there). Peaks of reserved and allocated bytes are usually reached at different
/// moments, so fragmentation at the peak is measured here, at one instant, not from the peaks.
struct ReservedPeak {
    std::int64_t reserved = 0;
    std::int64_t allocated = 0;            ///< allocated_bytes.all at that moment
    std::int64_t inactive_split_bytes = 0; ///< free bytes inside split segments at that moment
};

/// Returned by DevicePool::free for an address that lies in no segment of this pool.
inline constexpr int kNotOwned = -1;

/// A memory pool inside one DevicePool, PyTorch's MempoolId_t: (0, 0) is the default pool; any
/// other pair names a private pool (a CUDA graph's, a torch.cuda.MemPool's).
using PoolId = std::pair<std::uint64_t, std::uint64_t>;
inline constexpr PoolId kDefaultPoolId{0, 0};

class DevicePool {
public:
    DevicePool(Backend& backend, PoolOptions options, PoolListener* listener = nullptr);
    ~DevicePool(); ///< forgets everything; never calls the backend
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;

    /// Allocate `size` bytes (size 0 is served as one 512-byte block, as PyTorch does; the hooks
    /// forward size 0 to the driver before reaching here). Returns kSuccess and *ptr, or the
    /// backend's error code after PyTorch's release-and-retry sequence (num_ooms counted,
    /// listener->on_oom called). `site` goes to the listener with the request's events. Never
    /// throws.
    int malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* ptr, RequestSite site = 0);

    /// malloc into memory pool `pool_id` (kDefaultPoolId: the same as above). A private pool has
    /// its own small and large free sets and segments, as PyTorch's PrivatePool: its blocks serve
    /// only requests to the same id, and a request to it never takes a default-pool block. Its
    /// segments are never given back (neither by empty_cache() nor by the retries before an
    /// out-of-memory): the pool cannot know when the graph or MemPool that owns them is gone, so
    /// it takes them to be in use, as PyTorch does until releasePool. A request to a private pool
    /// does not run release_cached_blocks before failing, as PyTorch's during a capture does not.
    /// Without caching (Mode::passthrough) the id changes nothing.
    int malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* ptr, PoolId pool_id, RequestSite site = 0);

    /// Free a pointer returned by malloc. kSuccess; kInvalidValue if the address is inside one of
    /// this pool's segments but is not the start of an allocated block (double or interior
    /// free: nothing changes and invalid_frees() grows); kNotOwned if it lies in no segment.
    /// The block stops counting as allocated, active and requested at once (PyTorch's rules for
    /// a free without record_stream); if it must wait for a fence it counts in pending().
    int free(std::uintptr_t ptr);

    /// A block freed earlier that still waits (pending) becomes reusable now, without a fence:
    /// replay of a recorded free_completed. kSuccess, or kInvalidValue if `ptr` is not pending.
    int retire(std::uintptr_t ptr);

    /// The device finished all work queued before `mark` was taken (e.g. cuCtxSynchronize
    /// returned): every block freed before then becomes reusable without asking the device.
    std::uint64_t pending_mark() const;
    void retire_through(std::uint64_t mark);

    Lookup lookup(std::uintptr_t ptr) const;

    /// Retire pending blocks whose fences are done (never blocks). Blocks freed since the last
    /// fence get one new fence first, so after the device went idle this retires everything.
    void process_fences();
    /// torch.cuda.empty_cache(): wait for all fences, release every wholly-free segment.
    void empty_cache();

    stats::DeviceStats stats() const;
    void reset_peak_stats();
    void reset_accumulated_stats();
    std::int64_t invalid_frees() const;
    PoolCounters counters() const;
    PendingStats pending() const;
    /// Reset by reset_peak_stats() to the present moment, as the peaks are.
    ReservedPeak reserved_peak() const;

    /// Bytes in wholly-free cached segments: what empty_cache() would give back.
    std::size_t releasable_bytes() const;
    std::vector<SegmentInfo> snapshot() const;

    /// The context is gone (reset/destroyed): forget every block and segment without calling
    /// the backend. Stats keep their counters; current values drop to zero.
    void drop_all();

    /// Runs `fn` under the pool's lock: the listener's state, changed only in its callbacks
    /// (which run under this lock), is read or changed from outside through here. `fn` must
    /// not call into the pool. Exceptions from `fn` pass through (the lock is released).
    void with_lock(const std::function<void()>& fn) const;

    /// Used by pthread_atfork: hold the pool's lock across fork.
    void lock_for_fork();
    void unlock_after_fork();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace gpumemprof::pool
