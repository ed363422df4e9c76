// SPDX-License-Identifier: MIT
// The pool's block store (see block_store.hpp).
#include "pool/block_store.hpp"

#if GPUMEMPROF_POOL_CHECKS
#include <cstdio>
#include <cstdlib>
#endif

namespace gpumemprof::pool::detail {
namespace {

constexpr std::size_t kBlockChunk = 256;

} // namespace

BlockStore::BlockStore() {
    spare_blocks_.reserve(kBlockChunk);
    // One node made and given back: the cache learns the node size, and fill() can make more.
    Block seed;
    BlockSet(BlockCmp{}, NodeAlloc<Block*>(&nodes)).insert(&seed); // an empty set compares nothing
}

BlockStore::~BlockStore() = default;

void BlockStore::grow_spare_blocks() {
    auto chunk = std::make_unique<Block[]>(kBlockChunk);
    // Room for every block that exists, so recycle_block() never reallocates.
    spare_blocks_.reserve((block_chunks_.size() + 1) * kBlockChunk);
    block_chunks_.reserve(block_chunks_.size() + 1);
    for (std::size_t i = 0; i < kBlockChunk; ++i)
        spare_blocks_.push_back(&chunk[i]);
    block_chunks_.push_back(std::move(chunk));
}

void BlockStore::grow_spares(std::size_t nodes_needed) {
    if (spare_blocks_.size() < 2)
        grow_spare_blocks();
    nodes.fill(nodes_needed);
}

void BlockStore::forget_all() {
    small.blocks.clear();
    large.blocks.clear();
    small.unmapped.clear();
    large.unmapped.clear();
    private_pools.clear();
    active.clear();
    segments.clear();
    spare_blocks_.clear();
    for (auto& chunk : block_chunks_)
        for (std::size_t i = 0; i < kBlockChunk; ++i)
            spare_blocks_.push_back(&chunk[i]);
}

#if GPUMEMPROF_POOL_CHECKS
void BlockStore::check_links(const Block* b) {
    const auto fail = [&](const char* what) {
        std::fprintf(stderr, "gpumemprof: pool block chain broken at block 0x%llx (%zu bytes): %s\n",
                     static_cast<unsigned long long>(b->ptr), b->size, what);
        std::abort();
    };
    if (b->seg == nullptr || b->pool == nullptr)
        fail("no segment or pool");
    if (b->size == 0)
        fail("empty block");
    if (b->pool != b->seg->pool || b->stream != b->seg->stream)
        fail("in another pool or stream than its segment");
    if (b->prev == nullptr && b->seg->head != b)
        fail("first block is not the segment's head");
    if (b->prev == nullptr && b->ptr != b->seg->base)
        fail("first block does not start the segment");
    if (b->next == nullptr && b->ptr + b->size != b->seg->base + b->seg->size)
        fail("last block does not end the segment");
    // PyTorch's try_merge_blocks: a free neighbour mapped as b is merges with a freed b.
    const auto mergeable = [&](const Block* n) {
        return b->state == BState::free && n->state == BState::free && n->mapped == b->mapped;
    };
    if (b->prev != nullptr) {
        if (b->prev->next != b)
            fail("predecessor does not point back");
        if (b->prev->ptr + b->prev->size != b->ptr)
            fail("predecessor does not end where it starts");
        if (b->prev->seg != b->seg || b->prev->pool != b->pool)
            fail("predecessor in another segment or pool");
        if (mergeable(b->prev))
            fail("free predecessor left unmerged");
    }
    if (b->next != nullptr) {
        if (b->next->prev != b)
            fail("successor does not point back");
        if (b->ptr + b->size != b->next->ptr)
            fail("successor does not start where it ends");
        if (b->next->seg != b->seg || b->next->pool != b->pool)
            fail("successor in another segment or pool");
        if (mergeable(b->next))
            fail("free successor left unmerged");
    }
    if (b->ptr < b->seg->base || b->ptr + b->size > b->seg->base + b->seg->size)
        fail("outside its segment");
    if (b->state == BState::free && b->mapped && b->pool->blocks.count(const_cast<Block*>(b)) == 0)
        fail("a cached block missing from its free set");
}

void BlockStore::check_segment(const Segment& s) {
    if (s.head == nullptr || s.head->seg != &s) {
        std::fprintf(stderr, "gpumemprof: pool segment 0x%llx (%zu bytes) has no head block of its own\n",
                     static_cast<unsigned long long>(s.base), s.size);
        std::abort();
    }
    std::size_t sum = 0;
    for (const Block* b = s.head; b != nullptr; b = b->next) {
        check_links(b);
        sum += b->size;
    }
    if (sum != s.size) {
        std::fprintf(stderr, "gpumemprof: pool segment 0x%llx: its blocks sum to %zu bytes, not %zu\n",
                     static_cast<unsigned long long>(s.base), sum, s.size);
        std::abort();
    }
}
#endif

} // namespace gpumemprof::pool::detail
