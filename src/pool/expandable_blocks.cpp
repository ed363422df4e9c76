// SPDX-License-Identifier: MIT
// Expandable segments at the level of blocks (see expandable_blocks.hpp).
#include "pool/expandable_blocks.hpp"

#include "pool/rounding.hpp"

#include <algorithm>
#include <vector>

namespace gpumemprof::pool::detail {
namespace {

bool allocatable(const Block* b) {
    return b != nullptr && b->state == BState::free;
}

/// The contiguous mapped run of blocks around `b` (one "segment" in PyTorch's snapshot).
std::pair<std::uintptr_t, std::size_t> mapped_run(const Block* b) {
    const Block* first = b;
    while (first->prev != nullptr && first->prev->mapped)
        first = first->prev;
    std::size_t size = 0;
    for (const Block* x = first; x != nullptr && x->mapped; x = x->next)
        size += x->size;
    return {first->ptr, size};
}

} // namespace

BlockSet::iterator ExpandableBlocks::skip_growable_tail(BlockPool& pool, BlockSet::iterator it, std::uintptr_t stream) {
    const auto growable = [](const Block* b) {
        return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
    };
    auto next = std::next(it);
    while (next != pool.blocks.end() && (*next)->stream == stream && growable(*next) < growable(*it))
        it = next++;
    return it;
}

// find_expandable_block: the lowest address, in this stream's segments, where free and unmapped
// blocks together give `size` bytes of room; a new segment when none has room.
Block* ExpandableBlocks::find_expandable_block(BlockPool& pool, std::uintptr_t stream, std::size_t size, int* err) {
    Block key;
    key.stream = stream;
    key.ptr = 0;
    const auto has_room = [&](const Block* b) {
        std::size_t bytes = 0;
        while (bytes < size && allocatable(b)) {
            bytes += b->size;
            b = b->next;
        }
        return bytes >= size;
    };
    for (auto it = pool.unmapped.lower_bound(&key); it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
        Block* c = *it;
        if (allocatable(c->prev))
            c = c->prev; // a free block just before the unmapped range is used first
        if (has_room(c))
            return c;
    }
    // Address space for 1 1/8 of the device's memory, in pages of 2 MiB (small pool) or 20 MiB.
    std::size_t page = pool.is_small ? kSmallBuffer : kLargeBuffer;
    if (std::size_t gran = 0; s_.backend.vmm_granularity(&gran) == kSuccess && gran > 0 && page % gran != 0)
        page = (page + gran - 1) / gran * gran;
    std::size_t free_b = 0, total_b = 0;
    if (const int rc = s_.backend.memory_info(&free_b, &total_b); rc != kSuccess) {
        *err = rc;
        return nullptr;
    }
    const std::size_t address_space = total_b + total_b / 8;
    std::unique_ptr<ExpandableSegment> es;
    if (const int rc = ExpandableSegment::create(s_.backend, page, (address_space + page - 1) / page, &es);
        rc != kSuccess) {
        *err = rc;
        return nullptr;
    }
    BlockStore& store = s_.store;
    Block* b = store.new_block();
    b->ptr = es->base();
    b->size = es->size();
    b->stream = stream;
    b->pool = &pool;
    b->es = es.get();
    b->mapped = false;
    try {
        auto [it, inserted] = store.segments.try_emplace(b->ptr);
        b->seg = &it->second;
        try {
            store.unmapped_insert(pool, b);
        } catch (...) {
            store.segments.erase(it);
            throw;
        }
    } catch (...) {
        es->release();
        store.recycle_block(b);
        *err = kOutOfMemory;
        return nullptr;
    }
    *b->seg = Segment{b->ptr, b->size, stream, &pool, b, std::move(es)};
    return b;
}

// map_block: back the first `size` bytes of the unmapped block `to_map` with pages, merge the
// mapped part with free neighbours and put it in the free set.
bool ExpandableBlocks::map_block(Block* to_map, std::size_t size, int* err, RequestSite site) {
    std::size_t mapped = 0;
    if (const int rc = to_map->es->map(to_map->ptr, size, &mapped); rc != kSuccess) {
        *err = rc;
        return false;
    }
    BlockStore& store = s_.store;
    BlockPool& pool = *to_map->pool;
    const std::uintptr_t first = to_map->ptr;
    if (mapped < to_map->size) {
        Block* rest = store.new_block(); // spares were ensured for this request
        rest->ptr = to_map->ptr + mapped;
        rest->size = to_map->size - mapped;
        rest->stream = to_map->stream;
        rest->pool = &pool;
        rest->seg = to_map->seg;
        rest->es = to_map->es;
        rest->mapped = false;
        rest->prev = to_map;
        rest->next = to_map->next;
        if (rest->next)
            rest->next->prev = rest;
        to_map->next = rest;
        // rest takes to_map's place in the unmapped set: its node is reused, nothing is allocated.
        auto node = pool.unmapped.extract(to_map);
        to_map->size = mapped;
        node.value() = rest;
        pool.unmapped.insert(std::move(node));
    } else {
        store.unmapped_erase(pool, to_map);
    }
    to_map->mapped = true;
    store.try_merge(to_map, to_map->prev, pool);
    store.try_merge(to_map, to_map->next, pool);
    store.insert_free(pool, to_map);
    s_.total_allocated_memory += mapped;
    PoolState::for_types(pool, [&](int t) { s_.st.reserved_bytes[t].increase(static_cast<std::int64_t>(mapped)); });
    ++s_.st.num_device_alloc;
    if (s_.listener)
        s_.listener->on_segment_map(first, mapped, site);
    BlockStore::check_links(to_map);
    return true;
}

// try_allocate_expandable_block: map just enough pages for `size` bytes, grow the candidate run
// (free -> unmapped -> ...) until it holds `size`, take it out of the free set.
Block* ExpandableBlocks::obtain(BlockPool& pool, std::uintptr_t stream, std::size_t, std::size_t size, int* err,
                                RequestSite site) {
    Block* c = find_expandable_block(pool, stream, size, err);
    if (c == nullptr)
        return nullptr;
    if (!c->mapped && !map_block(c, std::min(c->size, size), err, site))
        return nullptr;
    while (c->size < size) {
        Block* n = c->next; // unmapped: map it and merge c into it
        if (!map_block(n, std::min(size - c->size, n->size), err, site))
            return nullptr;
        c = n;
    }
    s_.store.set_remove(pool, c);
    return c;
}

// unmap_block: give back the whole pages inside the free block `b`; what is left of it on either
// side stays a free mapped block.
void ExpandableBlocks::unmap_block(Block* b) {
    std::uintptr_t first = 0;
    std::size_t unmapped = 0;
    if (b->es->whole_pages_bytes(b->ptr, b->size) == 0)
        return;
    s_.ensure_spares(); // up to two new blocks below
    BlockStore& store = s_.store;
    BlockPool& pool = *b->pool;
    b->es->unmap(b->ptr, b->size, &first, &unmapped);
    if (unmapped == 0)
        return;
    store.set_remove(pool, b);
    const auto carve = [&](std::uintptr_t ptr, std::size_t size, Block* prev, Block* next) {
        Block* f = store.new_block();
        f->ptr = ptr;
        f->size = size;
        f->stream = b->stream;
        f->pool = &pool;
        f->seg = b->seg;
        f->es = b->es;
        f->prev = prev;
        f->next = next;
        if (prev)
            prev->next = f;
        else
            f->seg->head = f;
        if (next)
            next->prev = f;
        store.insert_free(pool, f);
    };
    const std::size_t before = first - b->ptr;
    const std::size_t after = b->size - before - unmapped;
    if (before > 0)
        carve(b->ptr, before, b->prev, b);
    if (after > 0)
        carve(first + unmapped, after, b, b->next);
    b->ptr = first;
    b->size = unmapped;
    b->mapped = false;
    store.try_merge(b, b->prev, pool);
    store.try_merge(b, b->next, pool);
    store.unmapped_insert(pool, b);
    s_.total_allocated_memory -= unmapped;
    PoolState::for_types(pool, [&](int t) { s_.st.reserved_bytes[t].decrease(static_cast<std::int64_t>(unmapped)); });
    ++s_.st.num_device_free;
    if (s_.listener)
        s_.listener->on_segment_unmap(first, unmapped);
    BlockStore::check_links(b);
}

// The device must be past every use of the pages first (cuMemUnmap does not wait as cudaFree
// does): a fence over all streams, which during a capture cannot be had.
void ExpandableBlocks::release_cached(BlockPool& pool) {
    bool any = false;
    for (const Block* b : pool.blocks)
        if (b->es->whole_pages_bytes(b->ptr, b->size) > 0) {
            any = true;
            break;
        }
    if (!any || !device_idle())
        return;
    std::vector<Block*> to_unmap(pool.blocks.begin(), pool.blocks.end()); // unmapping changes the set
    for (Block* b : to_unmap) {
        unmap_block(b);
        if (b->prev == nullptr && b->next == nullptr && !b->mapped)
            release_expandable_segment(b);
    }
}

bool ExpandableBlocks::device_idle() {
    const FenceId f = s_.backend.fence_record();
    if (f == 0)
        return false;
    const bool ok = s_.backend.fence_wait(f);
    s_.backend.fence_release(f);
    return ok;
}

void ExpandableBlocks::release_expandable_segment(Block* b) {
    BlockStore& store = s_.store;
    BlockPool& pool = *b->pool;
    store.unmapped_erase(pool, b);
    const std::uintptr_t base = b->seg->base;
    b->seg->es->release();
    store.segments.erase(base);
    store.recycle_block(b);
}

void ExpandableBlocks::snapshot(const Segment& s, std::vector<SegmentInfo>& out) const {
    for (const Block* b = s.head; b != nullptr; b = b->next) {
        if (!b->mapped)
            continue;
        if (b->prev == nullptr || !b->prev->mapped) {
            out.emplace_back();
            out.back().address = b->ptr;
            out.back().stream = s.stream;
            out.back().is_small = s.pool->is_small;
            out.back().is_expandable = true;
        }
        SegmentInfo& si = out.back();
        si.total_size += b->size;
        if (b->state == BState::allocated)
            si.allocated_size += b->size;
        if (b->state != BState::free) {
            si.active_size += b->size;
            si.requested_size += b->requested;
        }
        si.blocks.push_back(BlockInfo{b->ptr, b->size, b->requested, public_state(b->state)});
    }
}

std::pair<std::uintptr_t, std::size_t> ExpandableBlocks::range_of(const Segment&, const Block* b) const {
    return b->mapped ? mapped_run(b) : std::make_pair(b->ptr, b->size);
}

} // namespace gpumemprof::pool::detail
