// SPDX-License-Identifier: MIT
// The pool's records: a Block (a contiguous part of a segment, free, handed out or pending), the
// free sets it sits in while cached (BlockPool: PyTorch's small and large pools), and a Segment
// (one piece of memory from the Backend, or one expandable address range). See device_pool.hpp
// for the nouns.
#pragma once

#include "pool/expandable_segment.hpp"
#include "pool/node_cache.hpp"
#include "stats/device_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>

namespace gpumemprof::pool::detail {

enum class BState : std::uint8_t {
    free,      ///< cached: in its pool's free set
    allocated, ///< handed out
    pending,   ///< freed by the program, waiting for a fence (PyTorch: event_count > 0)
};

struct Segment;
struct BlockPool;
struct Block;

// BlockComparatorSize: stream first, so lower_bound + "same stream?" is a per-stream best fit.
struct BlockCmp {
    bool operator()(const Block* a, const Block* b) const;
};

// BlockComparatorAddress: unmapped ranges of expandable segments, per stream by address.
struct BlockAddrCmp {
    bool operator()(const Block* a, const Block* b) const;
};

using BlockSet = std::set<Block*, BlockCmp, NodeAlloc<Block*>>;
using UnmappedSet = std::set<Block*, BlockAddrCmp, NodeAlloc<Block*>>;

struct Block {
    std::uintptr_t ptr = 0;
    std::size_t size = 0;
    std::size_t requested = 0;
    std::uintptr_t stream = 0;
    Block* prev = nullptr; ///< neighbours inside the segment (address order)
    Block* next = nullptr;
    Segment* seg = nullptr;
    BlockPool* pool = nullptr;
    std::uint64_t gc_count_base = 0;
    Block* pending_next = nullptr;   ///< link in the unfenced list or a fence group
    std::uint64_t free_seq = 0;      ///< pending: the number of the free that made it so
    ExpandableSegment* es = nullptr; ///< set for blocks of an expandable segment
    bool mapped = true;              ///< false: unmapped address space of an expandable segment
    BState state = BState::free;
    /// Its node in pool->blocks while it is cached (free and mapped, which a block only is while
    /// in that set, but inside one pool call that is changing it); meaningless otherwise.
    BlockSet::iterator pos{};

    bool is_split() const { return prev != nullptr || next != nullptr; }
};

inline bool BlockCmp::operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream)
        return a->stream < b->stream;
    if (a->size != b->size)
        return a->size < b->size;
    return a->ptr < b->ptr;
}

inline bool BlockAddrCmp::operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream)
        return a->stream < b->stream;
    return a->ptr < b->ptr;
}

/// PyTorch's BlockPool: the cached blocks of one size class (small or large).
struct BlockPool {
    BlockPool(NodeCache* nodes, bool small)
        : blocks(BlockCmp{}, NodeAlloc<Block*>(nodes)), unmapped(BlockAddrCmp{}, NodeAlloc<Block*>(nodes)),
          is_small(small), stat_type(small ? stats::kSmallPool : stats::kLargePool) {}
    BlockSet blocks;      ///< free blocks only
    UnmappedSet unmapped; ///< unmapped ranges of expandable segments
    bool is_small = false;
    std::uint64_t get_free_blocks_call_count = 0; ///< GC clock
    int stat_type = stats::kLargePool;
};

/// PyTorch's PrivatePool: the free sets of one private memory pool (a CUDA graph's, a MemPool's).
struct PrivatePool {
    explicit PrivatePool(NodeCache* nodes) : small(nodes, true), large(nodes, false) {}
    BlockPool small;
    BlockPool large;
};

struct Segment {
    std::uintptr_t base = 0;
    std::size_t size = 0;
    std::uintptr_t stream = 0;
    BlockPool* pool = nullptr;
    Block* head = nullptr;                 ///< the block at `base`
    std::unique_ptr<ExpandableSegment> es; ///< set for an expandable segment (base/size: its range)
};

} // namespace gpumemprof::pool::detail
