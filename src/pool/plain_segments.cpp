// SPDX-License-Identifier: MIT
// Whole segments from the Backend (see plain_segments.hpp).
#include "pool/plain_segments.hpp"

#include <algorithm>
#include <limits>

namespace gpumemprof::pool::detail {

// alloc_block's cudaMalloc: one new segment (not put in the free set: the caller hands it out).
Block* PlainSegments::obtain(BlockPool& pool, std::uintptr_t stream, std::size_t alloc_size, std::size_t, int* err,
                             RequestSite site) {
    std::uintptr_t ptr = 0;
    const int rc = s_.backend.allocate(alloc_size, &ptr);
    if (rc != kSuccess) {
        if (rc != kOutOfMemory)
            s_.note_driver_error(rc);
        *err = rc;
        return nullptr;
    }
    Segment* seg = nullptr;
    try {
        seg = &s_.store.segments.try_emplace(ptr).first->second;
    } catch (...) {
        ++s_.counters.host_failures;
        s_.backend.release(ptr, alloc_size);
        *err = kOutOfMemory;
        return nullptr;
    }
    Block* b = s_.store.new_block();
    b->ptr = ptr;
    b->size = alloc_size;
    b->stream = stream;
    b->pool = &pool;
    b->seg = seg;
    *seg = Segment{ptr, alloc_size, stream, &pool, b, nullptr};
    s_.total_allocated_memory += alloc_size;
    PoolState::for_types(pool, [&](int t) {
        s_.st.segment[t].increase(1);
        s_.st.reserved_bytes[t].increase(static_cast<std::int64_t>(alloc_size));
    });
    if (alloc_size >= s_.max_split_size)
        s_.st.oversize_segments.increase(1);
    ++s_.st.num_device_alloc;
    if (s_.listener)
        s_.listener->on_segment_alloc(ptr, alloc_size, site);
    return b;
}

// release_block: give a whole cached segment back (cudaFree).
int PlainSegments::release(Block* b) {
    BlockPool& pool = *b->pool;
    ++s_.st.num_device_free;
    if (s_.listener)
        s_.listener->on_segment_free(b->ptr, b->size);
    s_.store.set_remove(pool, b);
    // The segment leaves the books either way (a faulted context frees nothing, and can use
    // nothing again); the error is counted for the report and returned.
    const int rc = s_.backend.release(b->ptr, b->size);
    if (rc != kSuccess)
        s_.note_driver_error(rc);
    s_.total_allocated_memory -= b->size;
    PoolState::for_types(pool, [&](int t) {
        s_.st.segment[t].decrease(1);
        s_.st.reserved_bytes[t].decrease(static_cast<std::int64_t>(b->size));
    });
    if (b->size >= s_.max_split_size)
        s_.st.oversize_segments.decrease(1);
    s_.store.segments.erase(b->seg->base);
    s_.store.recycle_block(b);
    return rc;
}

// release_available_cached_blocks: only with max_split_size set; free one oversize block big
// enough, else the largest oversize blocks of this stream until enough bytes went back.
bool PlainSegments::release_available(BlockPool& pool, std::uintptr_t stream, std::size_t size) {
    const std::size_t max_split_size = s_.max_split_size;
    if (max_split_size == std::numeric_limits<std::size_t>::max())
        return false;
    Block key;
    key.stream = stream;
    key.size = std::max(size, max_split_size);
    key.ptr = 0;
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) {
        if (it == pool.blocks.begin())
            return false;
        std::size_t released = 0;
        --it; // the largest block of this stream, if it has any
        while (released < key.size && (*it)->size >= max_split_size && (*it)->stream == stream) {
            auto cur = it;
            const bool is_first = cur == pool.blocks.begin();
            if (!is_first)
                --it;
            Block* b = *cur;
            if (!b->is_split()) { // always true by construction; guards our segment bookkeeping
                released += b->size;
                release(b);
            }
            if (is_first)
                break;
        }
        return released >= key.size;
    }
    if ((*it)->is_split())
        return false;
    release(*it);
    return true;
}

// release_blocks: every cached unsplit block of the pool goes back to the device.
void PlainSegments::release_cached(BlockPool& pool) {
    auto it = pool.blocks.begin();
    while (it != pool.blocks.end()) {
        Block* b = *it;
        ++it;
        if (!b->is_split())
            release(b);
    }
}

// garbage_collect_cached_blocks: free aged unsplit blocks until `target` bytes went back; each
// pass frees every block at least as old as the average, without stopping at the target, so GC
// does not re-trigger at once.
void PlainSegments::collect_garbage(BlockPool& large, std::size_t target) {
    std::size_t reclaimed = 0;
    std::uint64_t total_age = 0;
    std::int64_t freeable = 0;
    const auto age = [&](const Block* b) { return large.get_free_blocks_call_count - b->gc_count_base; };
    for (const Block* b : large.blocks) {
        if (!b->is_split()) {
            total_age += age(b);
            ++freeable;
        }
    }
    if (freeable == 0)
        return;
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
        const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
        freed = false;
        auto it = large.blocks.begin();
        while (it != large.blocks.end()) {
            Block* b = *it;
            ++it;
            if (!b->is_split() && static_cast<double>(age(b)) >= age_threshold) {
                freed = true;
                reclaimed += b->size;
                total_age -= age(b);
                --freeable;
                release(b);
            }
        }
    }
}

void PlainSegments::snapshot(const Segment& s, std::vector<SegmentInfo>& out) const {
    SegmentInfo si;
    si.address = s.base;
    si.total_size = s.size;
    si.stream = s.stream;
    si.is_small = s.pool->is_small;
    for (const Block* b = s.head; b != nullptr; b = b->next) {
        BlockInfo bi{b->ptr, b->size, b->requested, public_state(b->state)};
        if (b->state == BState::allocated)
            si.allocated_size += b->size;
        if (b->state != BState::free) { // as PyTorch's snapshot: pending blocks are active there
            si.active_size += b->size;
            si.requested_size += b->requested;
        }
        si.blocks.push_back(bi);
    }
    out.push_back(std::move(si));
}

} // namespace gpumemprof::pool::detail
