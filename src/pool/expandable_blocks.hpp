// SPDX-License-Identifier: MIT
// Expandable segments at the level of blocks (PyTorch's "Note [Expandable Segments]" and its
// allocator functions): per stream and pool one ExpandableSegment whose address range is a chain
// of blocks like a segment's, the unmapped parts being free blocks with mapped == false kept in
// pool.unmapped. Growing maps pages at the end of a free run and merges; empty_cache() (and the
// last retry before an out-of-memory) unmaps the whole free pages. reserved_bytes follows the
// mapped bytes; num_device_alloc/num_device_free count map/unmap operations; segment counts stay 0.
#pragma once

#include "pool/pool_state.hpp"
#include "pool/segment_supply.hpp"

namespace gpumemprof::pool::detail {

class ExpandableBlocks final : public SegmentSupply {
public:
    explicit ExpandableBlocks(PoolState& s) : s_(s) {}

    /// try_allocate_expandable_block: map just enough pages for `rounded` bytes.
    Block* obtain(BlockPool& pool, std::uintptr_t stream, std::size_t alloc_size, std::size_t rounded, int* err,
                  RequestSite site) override;
    /// release_blocks' part for expandable segments: unmap the free pages, drop a segment that
    /// became wholly unmapped.
    void release_cached(BlockPool& pool) override;
    /// Never: expandable blocks are given back by release_cached only.
    bool release_available(BlockPool&, std::uintptr_t, std::size_t) override { return false; }
    /// Expandable blocks are not garbage-collected (PyTorch skips them too): their free pages go
    /// back at empty_cache() and at the last retry before an out-of-memory.
    void collect_garbage(BlockPool&, std::size_t) override {}
    std::size_t releasable(const Block* b) const override { return b->es->whole_pages_bytes(b->ptr, b->size); }
    void snapshot(const Segment& s, std::vector<SegmentInfo>& out) const override;
    std::pair<std::uintptr_t, std::size_t> range_of(const Segment& s, const Block* b) const override;

    /// get_free_block's best fit in an expandable segment: among equally good candidates, take the
    /// one that leaves the growable end (a free block followed by unmapped space) for a later
    /// request.
    static BlockSet::iterator skip_growable_tail(BlockPool& pool, BlockSet::iterator it, std::uintptr_t stream);

private:
    Block* find_expandable_block(BlockPool& pool, std::uintptr_t stream, std::size_t size, int* err);
    bool map_block(Block* to_map, std::size_t size, int* err, RequestSite site);
    void unmap_block(Block* b);
    bool device_idle();
    void release_expandable_segment(Block* b);

    PoolState& s_;
};

} // namespace gpumemprof::pool::detail
