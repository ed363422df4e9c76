// SPDX-License-Identifier: MIT
// PyTorch's DeviceCachingAllocator policy (see caching_policy.hpp).
#include "pool/caching_policy.hpp"

#include "pool/expandable_blocks.hpp"
#include "pool/rounding.hpp"

#include <algorithm>

namespace gpumemprof::pool::detail {
namespace {

/// A split of a cached block this many times the request or larger (three quarters or more of
/// it left over) waits for a freed block that fits whole (retire_before_split). Chosen with
/// bench/fenced_footprint.py on a recorded PyTorch loop with a side stream: the smallest ratio
/// that keeps its goal with the device 1 ms and 4 ms behind (figures in docs/measurements.md).
constexpr std::size_t kSplitWaitRatio = 4;

} // namespace

OomInfo oom_record(PoolState& s, std::size_t size, std::size_t rounded, std::size_t alloc_size, int err) {
    OomInfo info;
    info.requested = size;
    info.rounded = rounded;
    info.allocation_size = alloc_size;
    s.backend.memory_info(&info.device_free, &info.device_total);
    info.allocated = s.st.allocated_bytes[stats::kAll].current;
    info.reserved = s.st.reserved_bytes[stats::kAll].current;
    for (const BlockPool* p : {&s.store.small, &s.store.large})
        for (const Block* b : p->blocks)
            info.largest_free_block = std::max(info.largest_free_block, b->size);
    info.allowed = s.set_fraction ? s.allowed() : 0;
    info.status = err;
    return info;
}

// get_free_block: best fit on the same stream, with the two oversize rules. The block stays in
// the free set (end() when none fits): alloc_found_block may keep its node for the remainder.
BlockSet::iterator CachingPolicy::find_free_block(BlockPool& pool, std::uintptr_t stream, std::size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    key.ptr = 0;
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream)
        return pool.blocks.end();
    if (s_.expandable)
        it = ExpandableBlocks::skip_growable_tail(pool, it, stream);
    const Block* b = *it;
    // A non-oversize request never takes an oversize block (it would be split or wasted).
    if (size < s_.max_split_size && b->size >= s_.max_split_size)
        return pool.blocks.end();
    // An oversize request takes an unsplit block at most max_non_split_rounding larger.
    if (size >= s_.max_split_size && b->size >= size + s_.max_non_split_rounding)
        return pool.blocks.end();
    return it;
}

/// PyTorch's get_free_block counts its calls for the garbage collector's reuse interval.
void CachingPolicy::count_lookup(BlockPool& pool) const {
    if (s_.gc_enabled)
        ++pool.get_free_blocks_call_count; // block reuse interval is only tracked for GC
}

/// find_free_block, the block taken out of the free set.
Block* CachingPolicy::get_free_block(BlockPool& pool, std::uintptr_t stream, std::size_t size) {
    count_lookup(pool);
    const auto it = find_free_block(pool, stream, size);
    if (it == pool.blocks.end())
        return nullptr;
    Block* b = *it;
    s_.store.set_erase(pool, it);
    return b;
}

// should_split: small pool (and every expandable block) keeps any remainder of >= 512 B; large
// pool splits only non-oversize requests and only when more than kSmallSize would remain
// (smaller tails stay as waste).
bool CachingPolicy::should_split(const Block* b, std::size_t size) const {
    const std::size_t remaining = b->size - size;
    if (b->pool->is_small || s_.expandable)
        return remaining >= kMinBlockSize;
    return size < s_.max_split_size && remaining > kSmallSize;
}

Block* CachingPolicy::alloc_block(BlockPool& pool, std::uintptr_t stream, std::size_t alloc_size, bool is_retry,
                                  int* err, RequestSite site, std::size_t rounded) {
    if (is_retry)
        ++s_.st.num_alloc_retries;
    if (s_.set_fraction && s_.total_allocated_memory + alloc_size > s_.allowed()) {
        *err = kOutOfMemory; // the per-process limit fails without asking the device
        return nullptr;
    }
    return supply_.obtain(pool, stream, alloc_size, rounded, err, site);
}

Block* CachingPolicy::alloc_found_block(Block* b, std::size_t size, std::size_t orig_size, bool split,
                                        BlockSet::iterator pos, RequestSite site) {
    BlockPool& pool = *b->pool;
    const bool already_split = b->is_split();
    const bool in_set = pos != pool.blocks.end();
    if (in_set && !split)
        s_.store.set_erase(pool, pos);
    // Expandable blocks stay out of inactive_split (their free pages can always go back).
    const bool counts_split = !s_.expandable;
    if (split) {
        Block* remaining = b;
        b = s_.store.split_front(remaining, size);
        if (in_set)
            s_.store.refresh_free(pool, pos, false); // the remainder keeps the found block's node
        else
            s_.store.insert_free(pool, remaining);
        if (counts_split && already_split) {
            // An already-split inactive block shrinks by `size`; the count is unchanged.
            PoolState::for_types(
                pool, [&](int t) { s_.st.inactive_split_bytes[t].decrease(static_cast<std::int64_t>(size)); });
        } else if (counts_split) {
            // A previously unsplit block now leaves one inactive split remainder.
            PoolState::for_types(pool, [&](int t) {
                s_.st.inactive_split_bytes[t].increase(static_cast<std::int64_t>(remaining->size));
                s_.st.inactive_split[t].increase(1);
            });
        }
    } else if (already_split && counts_split) {
        // An inactive split block becomes active as a whole.
        PoolState::for_types(pool, [&](int t) {
            s_.st.inactive_split_bytes[t].decrease(static_cast<std::int64_t>(b->size));
            s_.st.inactive_split[t].decrease(1);
        });
    }
    b->state = BState::allocated;
    b->requested = orig_size;
    s_.store.active.put(b->ptr, b);
    const auto bsize = static_cast<std::int64_t>(b->size);
    const auto req = static_cast<std::int64_t>(orig_size);
    PoolState::for_types(pool, [&](int t) {
        s_.st.allocation[t].increase(1);
        s_.st.allocated_bytes[t].increase(bsize);
        s_.st.active[t].increase(1);
        s_.st.active_bytes[t].increase(bsize);
        s_.st.requested_bytes[t].increase(req);
    });
    if (b->size >= s_.max_split_size)
        s_.st.oversize_allocations.increase(1);
    if (s_.listener)
        s_.listener->on_alloc(b->ptr, b->size, orig_size, b->stream, site);
    check_around(b);
    return b;
}

// (active/requested already dropped at the free request: take_back.) A cached neighbour takes b
// in and keeps its set node (refresh_free), so that a free next to its request's remainder
// usually changes no set.
Block* CachingPolicy::free_block(Block* b) {
    if (s_.listener)
        s_.listener->on_free_completed(b->ptr, b->size, b->requested);
    BlockStore& store = s_.store;
    BlockPool& pool = *b->pool;
    store.active.take(b->ptr); // before merging moves ptr
    std::int64_t net_blocks = 0;
    std::int64_t net_bytes = 0;
    const auto merged = [&](std::size_t subsumed) {
        if (subsumed > 0) {
            net_blocks -= 1;
            net_bytes -= static_cast<std::int64_t>(subsumed);
        }
    };
    // A cached neighbour (free and mapped: in the set at its pos) takes b in; the other one, if
    // cached too, is taken out of the set first, while every key there is still in order.
    Block* into = nullptr;
    for (Block* c : {b->next, b->prev}) {
        if (c != nullptr && c->state == BState::free && c->mapped) {
            into = c;
            break;
        }
    }
    Block* result = b;
    if (into != nullptr) {
        Block* const other = into == b->next ? b->prev : b->next;
        const bool with_other = store.detach_mergeable(b, other, pool);
        merged(into->size);    // as if b had taken `into` in
        store.absorb(into, b); // b is recycled
        if (with_other)
            merged(store.absorb(into, other));
        store.refresh_free(pool, into->pos, true);
        result = into;
    } else {
        store.insert_free(pool, b); // no neighbour is cached: nothing to merge
    }
    if (result->is_split()) {
        net_blocks += 1;
        net_bytes += static_cast<std::int64_t>(result->size);
    }
    if (s_.expandable)
        net_blocks = net_bytes = 0; // expandable blocks stay out of inactive_split
    PoolState::for_types(pool, [&](int t) {
        if (net_blocks > 0)
            s_.st.inactive_split[t].increase(net_blocks);
        else if (net_blocks < 0)
            s_.st.inactive_split[t].decrease(-net_blocks);
        if (net_bytes > 0)
            s_.st.inactive_split_bytes[t].increase(net_bytes);
        else if (net_bytes < 0)
            s_.st.inactive_split_bytes[t].decrease(-net_bytes);
    });
    check_around(result);
    return result;
}

void CachingPolicy::release_cached_blocks() {
    pending_.synchronize_all();
    supply_.release_cached(s_.store.large);
    supply_.release_cached(s_.store.small);
}

// garbage_collect_cached_blocks: free aged unsplit large-pool blocks until reserved drops below
// threshold * allowed.
void CachingPolicy::garbage_collect() {
    const auto gc_threshold =
        static_cast<std::size_t>(s_.options.conf.garbage_collection_threshold * static_cast<double>(s_.allowed()));
    if (s_.total_allocated_memory <= gc_threshold)
        return;
    supply_.collect_garbage(s_.store.large, s_.total_allocated_memory - gc_threshold);
}

int CachingPolicy::out_of_memory(std::size_t size, std::size_t rounded, std::size_t alloc_size, int err,
                                 RequestSite site) {
    const OomInfo info = oom_record(s_, size, rounded, alloc_size, err);
    ++s_.st.num_ooms;
    if (s_.listener)
        s_.listener->on_oom(info, site);
    return err;
}

/// A miss while blocks wait: retire what the device has passed; then wait (bounded) for the
/// oldest fence whose blocks could serve the request, and for the next, until a cached block
/// fits or no pending block could help. Returns the block, or nullptr (the pool grows).
Block* CachingPolicy::reclaim_pending(BlockPool& pool, std::uintptr_t stream, std::size_t rounded) {
    Block* b = nullptr;
    if (pending_.any_fenced() && pending_.process() && (b = get_free_block(pool, stream, rounded)))
        return b;
    if (pending_.any_unfenced()) {
        pending_.fence_unfenced();
        if (pending_.process() && (b = get_free_block(pool, stream, rounded)))
            return b;
    }
    for (;;) {
        std::size_t index = 0;
        while (index < pending_.fenced_groups() && !pending_.group_may_serve(index, pool, stream, rounded))
            ++index;
        if (index == pending_.fenced_groups())
            return nullptr;
        if (!pending_.wait_and_retire(index))
            return nullptr;
        if ((b = get_free_block(pool, stream, rounded)))
            return b;
    }
}

/// The cached block that would serve `rounded` bytes on `stream` (find_free_block's choice, not
/// counted as a lookup), or nullptr.
const Block* CachingPolicy::best_fit(BlockPool& pool, std::uintptr_t stream, std::size_t rounded) {
    const auto it = find_free_block(pool, stream, rounded);
    return it != pool.blocks.end() ? *it : nullptr;
}

/// Would `c`, once free, serve the request whole (no split)?
bool CachingPolicy::serves_whole(const Block* c, const BlockPool& pool, std::uintptr_t stream,
                                 std::size_t rounded) const {
    return c->pool == &pool && c->stream == stream && c->size >= rounded && !should_split(c, rounded);
}

/// Freed blocks wait and the best cached fit would be split. PyTorch, reusing at once, would have
/// the freed blocks back already; a split made instead cuts a larger block for good and the pool
/// grows later (a recorded PyTorch loop with a side stream grew that way: docs/measurements.md). So first retire
/// what the device has passed (a query of the oldest fences' events). If the split would still
/// leave most of a block unused (the best fit is kSplitWaitRatio times the request or more, or
/// there is none) and a waiting block would serve the request whole, fence it if it is not yet
/// and wait (bounded) for it. Fences are recorded only there and by the free path's cadence: each
/// costs a driver call per stream of the program. Returns true when a wait ran out of time (the
/// miss path then does not wait again).
bool CachingPolicy::retire_before_split(BlockPool& pool, std::uintptr_t stream, std::size_t rounded) {
    const Block* best = best_fit(pool, stream, rounded);
    if (best != nullptr && !should_split(best, rounded))
        return false;
    if (pending_.any_fenced() && pending_.process())
        best = best_fit(pool, stream, rounded);
    if (best != nullptr && (!should_split(best, rounded) || best->size < kSplitWaitRatio * rounded))
        return false;
    const auto whole = [&](const Block* c) { return serves_whole(c, pool, stream, rounded); };
    bool in_unfenced = false;
    std::size_t index = pending_.find_group(whole, &in_unfenced);
    if (index == pending_.fenced_groups() && in_unfenced) {
        pending_.fence_unfenced();
        index = pending_.find_group(whole, &in_unfenced);
    }
    return index < pending_.fenced_groups() && !pending_.wait_and_retire(index);
}

int CachingPolicy::malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* out, PrivatePool* priv,
                          RequestSite site) {
    const std::size_t rounded = round_size(s_.options.conf, size);
    BlockPool& pool = priv == nullptr ? s_.store.pool_for(rounded) : BlockStore::pool_for(*priv, rounded);
    const std::size_t alloc_size = allocation_size(rounded);
    s_.ensure_spares();

    // PyTorch runs process_events before every lookup; its events are rare (record_stream)
    // while ours cover every free, so a fence is polled only when the cache has no fit: a hit
    // makes no device call. (With defer_frees off there are no fences at all and the order is
    // PyTorch's.)
    const bool wait_ran_out = !pending_.empty() && !pool.is_small && retire_before_split(pool, stream, rounded);
    count_lookup(pool);
    auto pos = find_free_block(pool, stream, rounded);
    Block* b = pos != pool.blocks.end() ? *pos : nullptr;
    if (b == nullptr && !pending_.empty() && !wait_ran_out)
        b = reclaim_pending(pool, stream, rounded); // our stand-in for the free-memory callbacks
    if (b == nullptr)
        ++s_.counters.misses;
    int err = kOutOfMemory;
    if (b == nullptr) {
        if (s_.gc_enabled)
            garbage_collect();
        b = alloc_block(pool, stream, alloc_size, false, &err, site, rounded);
        if (b == nullptr && err == kOutOfMemory && supply_.release_available(pool, stream, rounded))
            b = alloc_block(pool, stream, alloc_size, false, &err, site, rounded);
        // PyTorch skips this step while a capture (or a MemPool context) is under way.
        if (b == nullptr && err == kOutOfMemory && priv == nullptr) {
            release_cached_blocks();
            b = alloc_block(pool, stream, alloc_size, true, &err, site, rounded);
        }
    }
    if (b == nullptr) {
        // A code other than out-of-memory is a device error: PyTorch raises it from alloc_block
        // (C10_CUDA_CHECK) without the OOM path, and so do we.
        if (err != kOutOfMemory)
            return err;
        return out_of_memory(size, rounded, alloc_size, err, site);
    }
    if (pos != pool.blocks.end() && *pos != b)
        pos = pool.blocks.end(); // not the block found first (reclaimed or new): in no set now
    const bool split = should_split(b, rounded);
    b = alloc_found_block(b, rounded, size, split, pos, site);
    *out = b->ptr;
    s_.note_reserved_peak();
    return kSuccess;
}

int CachingPolicy::free(std::uintptr_t ptr) {
    int rc = kSuccess;
    Block* b = take_back(ptr, &rc);
    if (b == nullptr)
        return rc;
    // If the block must wait for a fence, that is the pool's business (pending).
    if (s_.options.defer_frees && !(s_.options.reuse_when_ordered && s_.backend.frees_ordered()))
        pending_.make_pending(b);
    else
        free_block(b);
    return kSuccess;
}

void CachingPolicy::check_around(const Block* b) {
#if GPUMEMPROF_POOL_CHECKS
    BlockStore::check_links(b);
    if (b->prev)
        BlockStore::check_links(b->prev);
    if (b->next)
        BlockStore::check_links(b->next);
#else
    (void)b;
#endif
}

} // namespace gpumemprof::pool::detail
