// SPDX-License-Identifier: MIT
// PyTorch's DeviceCachingAllocator policy over the block store, rule for rule: rounding, small and
// large pools, best fit per stream with the oversize rules, split, merge, garbage collection, the
// release-and-retry sequence and the out-of-memory record. Device memory comes from the pool's
// SegmentSupply; freed blocks may wait in PendingFrees, which this policy asks to retire blocks
// where PyTorch's free-memory callbacks would run.
#pragma once

#include "pool/pending_frees.hpp"
#include "pool/pool_state.hpp"
#include "pool/segment_supply.hpp"

#include <cstddef>
#include <cstdint>

namespace gpumemprof::pool::detail {

class CachingPolicy {
public:
    CachingPolicy(PoolState& s, SegmentSupply& supply, PendingFrees& pending)
        : s_(s), supply_(supply), pending_(pending) {}

    /// DeviceCachingAllocator::malloc, from the default pool or from the private pool `priv`
    /// (whose segments release_cached_blocks never gives back: its retry is skipped, as during a
    /// capture). kSuccess and *out, or the error code. `site` goes to the listener with the
    /// request's events (RequestSite).
    int malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* out, PrivatePool* priv = nullptr,
               RequestSite site = 0);

    /// free()'s accounting, in every mode: the block at `ptr` stops counting as allocated,
    /// active and requested (PyTorch's free() of a block without record_stream) and the listener
    /// hears of it. Returns the block, or nullptr with *rc: kInvalidValue for an address inside a
    /// segment that is not an allocated block (invalid_frees grows), kNotOwned otherwise.
    __attribute__((always_inline)) Block* take_back(std::uintptr_t ptr, int* rc);
    /// free() in caching mode: take_back, then the block waits for a fence or is cached at once.
    /// kSuccess, or take_back's code.
    int free(std::uintptr_t ptr);

    /// free_block: the free completes: merge with free neighbours, back into the cache, stats.
    /// Returns the merged block: b, or the neighbour that took it in.
    Block* free_block(Block* b);
    /// alloc_block: a new segment (or mapped pages) for the request, not cached: the caller hands
    /// it out. is_retry counts num_alloc_retries even if the attempt then fails.
    Block* alloc_block(BlockPool& pool, std::uintptr_t stream, std::size_t alloc_size, bool is_retry, int* err,
                       RequestSite site, std::size_t rounded = 0);
    /// alloc_found_block: optional split (front part handed out, tail stays cached), stats.
    /// `pos`: b's place in its free set, or end() when b is in none (then it stays out).
    Block* alloc_found_block(Block* b, std::size_t size, std::size_t orig_size, bool split, BlockSet::iterator pos,
                             RequestSite site);
    /// release_cached_blocks (empty cache): wait for the fences, then free what can go, large
    /// pool first.
    void release_cached_blocks();
    /// The out-of-memory path: the record PyTorch's message is made of, counted and heard by the
    /// listener. Returns `err`.
    int out_of_memory(std::size_t size, std::size_t rounded, std::size_t alloc_size, int err, RequestSite site);

private:
    BlockSet::iterator find_free_block(BlockPool& pool, std::uintptr_t stream, std::size_t size);
    void count_lookup(BlockPool& pool) const;
    Block* get_free_block(BlockPool& pool, std::uintptr_t stream, std::size_t size);
    bool should_split(const Block* b, std::size_t size) const;
    void garbage_collect();
    Block* reclaim_pending(BlockPool& pool, std::uintptr_t stream, std::size_t rounded);
    const Block* best_fit(BlockPool& pool, std::uintptr_t stream, std::size_t rounded);
    bool serves_whole(const Block* c, const BlockPool& pool, std::uintptr_t stream, std::size_t rounded) const;
    bool retire_before_split(BlockPool& pool, std::uintptr_t stream, std::size_t rounded);
    static void check_around(const Block* b);

    PoolState& s_;
    SegmentSupply& supply_;
    PendingFrees& pending_;
};

inline Block* CachingPolicy::take_back(std::uintptr_t ptr, int* rc) {
    Block* b = ptr != 0 ? s_.store.active.value_or(ptr, nullptr) : nullptr;
    if (b == nullptr || b->state != BState::allocated) {
        if (b != nullptr || s_.store.segment_of(ptr) != nullptr) {
            ++s_.invalid_frees; // double free (pending block) or an address inside a segment
            *rc = kInvalidValue;
            return nullptr;
        }
        *rc = kNotOwned;
        return nullptr;
    }
    BlockPool& pool = *b->pool;
    const auto bsize = static_cast<std::int64_t>(b->size);
    PoolState::for_types(pool, [&](int t) {
        s_.st.allocation[t].decrease(1);
        s_.st.allocated_bytes[t].decrease(bsize);
        s_.st.active[t].decrease(1);
        s_.st.active_bytes[t].decrease(bsize);
        s_.st.requested_bytes[t].decrease(static_cast<std::int64_t>(b->requested));
    });
    if (s_.listener)
        s_.listener->on_free_requested(b->ptr, b->size, b->requested);
    if (b->size >= s_.max_split_size)
        s_.st.oversize_allocations.decrease(1);
    return b;
}

/// What the pool knew when a request failed: PyTorch's OOM message inputs, from the pool's
/// statistics and the device (one builder for every out-of-memory, the >= 1 EiB refusal too).
OomInfo oom_record(PoolState& s, std::size_t size, std::size_t rounded, std::size_t alloc_size, int err);

} // namespace gpumemprof::pool::detail
