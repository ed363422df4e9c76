// SPDX-License-Identifier: MIT
// Where the policy's device memory comes from and goes back to: whole segments from the Backend
// (PlainSegments, cudaMalloc/cudaFree) or pages of expandable segments (ExpandableBlocks). One
// kind per pool, chosen when it is made; the policy calls this interface on a miss, on a release
// and for the snapshot, never on a cache hit.
#pragma once

#include "pool/block.hpp"
#include "pool/device_pool.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpumemprof::pool::detail {

class SegmentSupply {
public:
    virtual ~SegmentSupply() = default;

    /// alloc_block's device part: a block of at least `rounded` bytes on `stream` in `pool`, in
    /// no free set, to be handed out at once: a new segment of `alloc_size` bytes, or pages mapped
    /// for `rounded` bytes. nullptr with *err (the Backend's code) when the device has no room.
    /// `site`: the request's, for the listener.
    virtual Block* obtain(BlockPool& pool, std::uintptr_t stream, std::size_t alloc_size, std::size_t rounded, int* err,
                          RequestSite site) = 0;
    /// release_blocks: give back to the device what of `pool`'s cached memory can go.
    virtual void release_cached(BlockPool& pool) = 0;
    /// release_available_cached_blocks: free one cached block big enough for `size`, else the
    /// largest of this stream until enough went back (only with max_split_size set). True if
    /// enough went back.
    virtual bool release_available(BlockPool& pool, std::uintptr_t stream, std::size_t size) = 0;
    /// garbage_collect_cached_blocks' release: give back aged cached segments of `large` until
    /// `target` bytes went back (each pass frees every block at least as old as the average).
    virtual void collect_garbage(BlockPool& large, std::size_t target) = 0;
    /// The bytes of the cached block `b` that empty_cache() would give back.
    virtual std::size_t releasable(const Block* b) const = 0;
    /// One SegmentInfo per segment as PyTorch's snapshot reports it (for expandable segments one
    /// per contiguous mapped range).
    virtual void snapshot(const Segment& s, std::vector<SegmentInfo>& out) const = 0;
    /// The segment a pointer lookup reports for block `b` of `s` (base, size).
    virtual std::pair<std::uintptr_t, std::size_t> range_of(const Segment& s, const Block* b) const = 0;
};

/// The snapshot's state of a block.
inline BlockState public_state(BState s) {
    switch (s) {
    case BState::allocated: return BlockState::active_allocated;
    case BState::pending: return BlockState::active_pending_free;
    default: return BlockState::inactive;
    }
}

} // namespace gpumemprof::pool::detail
