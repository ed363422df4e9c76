// SPDX-License-Identifier: MIT
// The pool's block store: every Block and Segment record, the free sets (small and large
// BlockPool), the allocated/pending blocks by address, and the recycling of blocks and set nodes
// that keeps a call from reaching the heap once it began changing the pool. It knows the block
// chain (split, merge) but no policy: which block to take, split or release is CachingPolicy's.
// Under the pool's lock only.
#pragma once

#include "pool/block.hpp"
#include "pool/device_pool.hpp"
#include "pool/rounding.hpp"
#include "util/flat_map.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

// Debug-only checks of the block chain's invariants (after each change to a chain, and of every
// segment at each snapshot). Never with NDEBUG (-Db_ndebug=true, or if-release in a release
// build). Otherwise -Dpool_checks=true|false decides (scripts/test.sh turns them on in every
// stage); by default (auto) they are on in sanitizer and unoptimised builds and off in the
// optimised default build, the one users install and the hot-path benchmarks measure.
#ifndef GPUMEMPROF_POOL_CHECKS
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__OPTIMIZE__)
#define GPUMEMPROF_POOL_CHECKS 1
#else
#define GPUMEMPROF_POOL_CHECKS 0
#endif
#endif
#ifdef NDEBUG
#undef GPUMEMPROF_POOL_CHECKS
#define GPUMEMPROF_POOL_CHECKS 0
#endif

namespace gpumemprof::pool::detail {

class BlockStore {
public:
    BlockStore();
    ~BlockStore();
    BlockStore(const BlockStore&) = delete;
    BlockStore& operator=(const BlockStore&) = delete;

    NodeCache nodes; ///< before the sets: it outlives them (their nodes go back to it)
    BlockPool small{&nodes, true};
    BlockPool large{&nodes, false};
    util::FlatMap<Block*> active; ///< allocated + pending blocks by address (PyTorch's active_blocks)
    std::map<std::uintptr_t, Segment> segments;
    /// Private pools by id (PyTorch's graph_pools), made at their first request.
    std::map<PoolId, std::unique_ptr<PrivatePool>> private_pools;

    BlockPool& pool_for(std::size_t rounded) { return rounded <= kSmallSize ? small : large; }
    static BlockPool& pool_for(PrivatePool& p, std::size_t rounded) {
        return rounded <= kSmallSize ? p.small : p.large;
    }
    /// The private pool `id` (made now if it is new; may throw bad_alloc before anything changed).
    PrivatePool& private_pool(PoolId id) {
        auto [it, fresh] = private_pools.try_emplace(id);
        if (fresh) {
            try {
                it->second = std::make_unique<PrivatePool>(&nodes);
            } catch (...) {
                private_pools.erase(it);
                throw;
            }
        }
        return *it->second;
    }

    /// Everything a call may need, obtained before any state changes (may throw bad_alloc, which
    /// the public entry points turn into an error with the pool unchanged). A malloc can retire
    /// every pending block (each needs a set node unless it merges) and insert one split
    /// remainder; a free inserts at most one block; an erase gives its node back to the cache. So
    /// `pending_blocks + 2` cached nodes make every set insert of the call allocation-free, after
    /// the state began to change. The check is inline: on a pool hit everything is there already.
    void ensure_spares(std::size_t pending_blocks) {
        const std::size_t need = pending_blocks + 2;
        if (spare_blocks_.size() < 2 || nodes.count() < need) [[unlikely]]
            grow_spares(need);
        active.reserve_one();
    }

    /// A fresh record (spares were ensured for this call).
    Block* new_block() {
        if (spare_blocks_.empty())
            grow_spare_blocks();
        Block* b = spare_blocks_.back();
        spare_blocks_.pop_back();
        *b = Block{};
        return b;
    }
    void recycle_block(Block* b) { spare_blocks_.push_back(b); } // capacity covers every chunk block

    // Inserts take their node from `nodes`, erases give it back (NodeAlloc); the unmapped sets
    // hold the same nodes as the free sets (std::set nodes do not depend on the comparator).
    void set_insert(BlockPool& pool, Block* b) { b->pos = pool.blocks.insert(b).first; }
    void set_erase(BlockPool& pool, BlockSet::iterator it) { pool.blocks.erase(it); }
    /// b out of its free set if it is there.
    void set_remove(BlockPool& pool, Block* b) {
        if (auto it = pool.blocks.find(b); it != pool.blocks.end())
            set_erase(pool, it);
    }
    void unmapped_insert(BlockPool& pool, Block* b) { pool.unmapped.insert(b); }
    void unmapped_erase(BlockPool& pool, Block* b) {
        if (auto it = pool.unmapped.find(b); it != pool.unmapped.end())
            pool.unmapped.erase(it);
    }

    /// BlockPool::insert_into_blocks: b is cached from now on; also stamps the GC age base.
    void insert_free(BlockPool& pool, Block* b) {
        b->state = BState::free;
        b->gc_count_base = pool.get_free_blocks_call_count;
        set_insert(pool, b);
    }

    /// The free block at `it` got a new size (a split remainder: smaller; a merge: larger, with
    /// the same stream, so its key moved in that direction only): it is a cached block from now
    /// on (insert_free's stamps) and keeps its set node when the new key still sorts after its
    /// predecessor (shrunk) or before its successor (grown); otherwise it is sorted in again
    /// (erasing by iterator compares nothing, so the stale key does no harm). Most of the time a
    /// request's remainder or a freed block's merge leaves the order as it was.
    void refresh_free(BlockPool& pool, BlockSet::iterator it, bool grew) {
        Block* b = *it;
        b->state = BState::free;
        b->gc_count_base = pool.get_free_blocks_call_count;
        const BlockCmp less;
        if (!grew) {
            if (it != pool.blocks.begin() && !less(*std::prev(it), b)) {
                pool.blocks.erase(it);
                b->pos = pool.blocks.insert(b).first;
            }
        } else if (auto next = std::next(it); next != pool.blocks.end() && !less(b, *next)) {
            pool.blocks.erase(it);
            b->pos = pool.blocks.insert(next, b); // it only moved right: the search starts there
        }
    }

    /// Cut the first `size` bytes off `rest` into a new block, which takes rest's place in the
    /// chain before it; rest keeps the tail (its set membership is the caller's business).
    Block* split_front(Block* rest, std::size_t size) {
        Block* b = new_block();
        b->ptr = rest->ptr;
        b->size = size;
        b->stream = rest->stream;
        b->pool = rest->pool;
        b->seg = rest->seg;
        b->es = rest->es;
        b->prev = rest->prev;
        if (b->prev)
            b->prev->next = b;
        else
            b->seg->head = b;
        b->next = rest;
        rest->prev = b;
        rest->ptr += size;
        rest->size -= size;
        return b;
    }

    // try_merge_blocks: only with a cached (free) neighbour; returns the bytes absorbed.
    std::size_t try_merge(Block* dst, Block* src, BlockPool& pool) {
        return detach_mergeable(dst, src, pool) ? absorb(dst, src) : 0;
    }

    /// True when src, a neighbour of dst, is cached and may merge with it; then src is taken out
    /// of its set (before any key in the set changes: the search must see them all in order).
    bool detach_mergeable(const Block* dst, Block* src, BlockPool& pool) {
        if (src == nullptr || src->state != BState::free || src->mapped != dst->mapped)
            return false;
        if (!src->mapped)
            unmapped_erase(pool, src);
        else
            set_remove(pool, src);
        return true;
    }

    /// src, a neighbour of dst, becomes part of dst (chain links, address, size); src is recycled.
    /// Returns the bytes absorbed. Neither is in a set here (or dst's key is refreshed after).
    std::size_t absorb(Block* dst, Block* src) {
        if (dst->prev == src) {
            dst->ptr = src->ptr;
            dst->prev = src->prev;
            if (dst->prev)
                dst->prev->next = dst;
            else
                dst->seg->head = dst;
        } else {
            dst->next = src->next;
            if (dst->next)
                dst->next->prev = dst;
        }
        const std::size_t subsumed = src->size;
        dst->size += subsumed;
        recycle_block(src);
        return subsumed;
    }

    /// The segment holding `ptr`, or nullptr.
    const Segment* segment_of(std::uintptr_t ptr) const {
        auto it = segments.upper_bound(ptr);
        if (it == segments.begin())
            return nullptr;
        --it;
        const Segment& s = it->second;
        return ptr - s.base < s.size ? &s : nullptr;
    }

    /// Forget every block and segment (the context is gone); the records become spares again.
    void forget_all();

#if GPUMEMPROF_POOL_CHECKS
    /// The chain around `b` holds together: neighbours point back, addresses are contiguous, one
    /// segment, pool and stream, the first block starts the segment and the last one ends it (so,
    /// the chain being contiguous, the sizes sum to the segment's), and no free neighbour that
    /// the policy would have merged with b was left unmerged. Aborts with a message otherwise.
    static void check_links(const Block* b);
    /// Every block of `s`, from its head: check_links, and the sizes sum to the segment's. Between
    /// pool calls only (inside one, a block about to be handed out is free and in no set).
    static void check_segment(const Segment& s);
#else
    static void check_links(const Block*) {
    }
    static void check_segment(const Segment&) {
    }
#endif

private:
    void grow_spare_blocks();
    __attribute__((noinline)) void grow_spares(std::size_t nodes_needed);

    std::vector<std::unique_ptr<Block[]>> block_chunks_;
    std::vector<Block*> spare_blocks_;
};

} // namespace gpumemprof::pool::detail
