// SPDX-License-Identifier: MIT
// Segments obtained whole from the Backend (cudaMalloc) and given back whole (cudaFree): PyTorch's
// alloc_block, release_block, release_available_cached_blocks and release_blocks.
#pragma once

#include "pool/pool_state.hpp"
#include "pool/segment_supply.hpp"

namespace gpumemprof::pool::detail {

class PlainSegments final : public SegmentSupply {
public:
    explicit PlainSegments(PoolState& s) : s_(s) {}

    Block* obtain(BlockPool& pool, std::uintptr_t stream, std::size_t alloc_size, std::size_t rounded, int* err,
                  RequestSite site) override;
    void release_cached(BlockPool& pool) override;
    bool release_available(BlockPool& pool, std::uintptr_t stream, std::size_t size) override;
    void collect_garbage(BlockPool& large, std::size_t target) override;
    /// release_block: give a whole cached segment back (cudaFree). Returns the driver's answer;
    /// the segment leaves the books either way.
    int release(Block* b);
    std::size_t releasable(const Block* b) const override { return b->is_split() ? 0 : b->size; }
    void snapshot(const Segment& s, std::vector<SegmentInfo>& out) const override;
    std::pair<std::uintptr_t, std::size_t> range_of(const Segment& s, const Block*) const override {
        return {s.base, s.size};
    }

private:
    PoolState& s_;
};

} // namespace gpumemprof::pool::detail
