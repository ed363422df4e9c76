// SPDX-License-Identifier: MIT
// The rules applied here are PyTorch's (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator),
// named beside each step: alloc_block / release_block / map_block / unmap_block for segments,
// alloc_found_block / should_split for allocations, free / free_block / try_merge_blocks for frees.
#include "pool/torch_mirror.hpp"

#include "pool/rounding.hpp"
#include "util/flat_map.hpp"
#include "util/swallowed.hpp"

#include <algorithm>
#include <iterator>

namespace gpumemprof::pool {
namespace {

enum class State : std::uint8_t { free, allocated, pending };

struct Segment {
    std::uintptr_t base = 0;
    std::size_t size = 0; ///< a cudaMalloc's bytes; 0 for an expandable segment (it grows)
    bool small = false;
    bool expandable = false;
    std::uintptr_t stream = 0;
    MempoolId pool;
};

struct Block {
    std::size_t size = 0;
    std::size_t requested = 0;
    State state = State::free;
    Segment* seg = nullptr;
};

using Blocks = std::map<std::uintptr_t, Block>;

/// One expandable segment per (stream, pool, small/large pool), as PyTorch keeps them.
struct GroupKey {
    std::uintptr_t stream = 0;
    MempoolId pool;
    bool small = false;
    auto operator<=>(const GroupKey&) const = default;
};

} // namespace

struct TorchMirror::Impl {
    TorchRules rules;
    PoolListener* listener;
    mutable std::mutex mutex;
    /// The blocks in address order (a block's neighbours, the block containing an address), and
    /// by exact address: every event names the block it is about, one probe of `index` rather
    /// than a walk down the tree, whose nodes are cache misses on the framework's thread. Every
    /// change goes through put_block / erase_block.
    Blocks blocks;
    util::FlatMap<Blocks::iterator> index;
    std::map<std::uintptr_t, std::unique_ptr<Segment>> segments; // cudaMalloc'd, by base
    std::map<GroupKey, std::unique_ptr<Segment>> expandable;
    stats::DeviceStats st;
    ReservedPeak peak_record;
    bool reserved_grew = false;
    std::int64_t mismatches = 0;
    // What the program's resets took out of `st`: the largest peaks and the totals before them.
    stats::DeviceStats before_resets;
    int program_resets = 0;
    std::map<MempoolId, PrivatePoolBytes> private_pools;

    Impl(TorchRules r, PoolListener* l) : rules(std::move(r)), listener(l) {
        const std::size_t m = max_split();
        st.max_split_size = m == SIZE_MAX ? -1 : static_cast<std::int64_t>(m); // as DeviceCachingAllocator()
    }

    std::size_t max_split() const { return rules.max_split_size ? rules.max_split_size() : rules.conf.max_split_size; }
    bool expandable_on() const {
        return rules.expandable_segments ? rules.expandable_segments() : rules.conf.expandable_segments;
    }

    // round_size
    std::size_t round(std::size_t size) const {
        if (size < kMinBlockSize)
            return kMinBlockSize;
        const std::size_t divisions = rules.divisions ? rules.divisions(size) : divisions_for(rules.conf, size);
        if (divisions > 1 && size > kMinBlockSize * divisions)
            return roundup_power2_next_division(size, divisions);
        return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
    }

    // should_split
    bool should_split(const Block& b, std::size_t size) const {
        const std::size_t remaining = b.size - size;
        if (b.seg->small || expandable_on())
            return remaining >= kMinBlockSize;
        return size < max_split() && remaining > kSmallSize;
    }

    // Block::is_split (only asked of blocks of cudaMalloc'd segments)
    static bool is_split(std::uintptr_t addr, const Block& b) { return addr != b.seg->base || b.size != b.seg->size; }

    // get_stat_types_for_pool: the aggregate and the block's own pool
    static void increase(stats::StatArray& a, bool small, std::int64_t v) {
        a[stats::kAll].increase(v);
        a[small ? stats::kSmallPool : stats::kLargePool].increase(v);
    }
    static void decrease(stats::StatArray& a, bool small, std::int64_t v) {
        a[stats::kAll].decrease(v);
        a[small ? stats::kSmallPool : stats::kLargePool].decrease(v);
    }

    PrivatePoolBytes* private_pool(const MempoolId& id) {
        if (id.is_default())
            return nullptr;
        PrivatePoolBytes& p = private_pools[id];
        p.id = id;
        return &p;
    }
    void pool_reserved(const Segment& s, std::int64_t delta) {
        if (PrivatePoolBytes* p = private_pool(s.pool)) {
            p->reserved += delta;
            p->peak_reserved = std::max(p->peak_reserved, p->reserved);
        }
    }
    void pool_allocated(const Segment& s, std::int64_t delta) {
        if (PrivatePoolBytes* p = private_pool(s.pool)) {
            p->allocated += delta;
            p->peak_allocated = std::max(p->peak_allocated, p->allocated);
        }
    }

    /// Before the program resets `st`'s peaks (peaks) or totals (!peaks): keep what goes.
    void keep_before_reset(bool peaks) {
        std::vector<stats::Stat*> now, kept;
        st.for_each_stat([&](stats::Stat& s) { now.push_back(&s); });
        before_resets.for_each_stat([&](stats::Stat& s) { kept.push_back(&s); });
        for (std::size_t i = 0; i < now.size(); ++i) {
            if (peaks) {
                kept[i]->peak = std::max(kept[i]->peak, now[i]->peak);
            } else {
                kept[i]->allocated += now[i]->allocated;
                kept[i]->freed += now[i]->freed;
            }
        }
        if (!peaks) {
#define X(name) before_resets.name += st.name;
            GPUMEMPROF_STAT_COUNTERS(X)
#undef X
        }
    }

    stats::DeviceStats whole_run() const {
        stats::DeviceStats w = st;
        std::vector<stats::Stat*> out;
        w.for_each_stat([&](stats::Stat& s) { out.push_back(&s); });
        std::size_t i = 0;
        stats::DeviceStats kept = before_resets;
        kept.for_each_stat([&](stats::Stat& k) {
            out[i]->peak = std::max(out[i]->peak, k.peak);
            out[i]->allocated += k.allocated;
            out[i]->freed += k.freed;
            ++i;
        });
#define X(name) w.name += before_resets.name;
        GPUMEMPROF_STAT_COUNTERS(X)
#undef X
        return w;
    }

    void note_reserved_peak() {
        const std::int64_t reserved = st.reserved_bytes[stats::kAll].current;
        if (reserved > peak_record.reserved)
            peak_record = {reserved, st.allocated_bytes[stats::kAll].current,
                           st.inactive_split_bytes[stats::kAll].current};
    }

    Blocks::iterator find_block(std::uintptr_t addr) {
        const Blocks::iterator* it = index.find(addr);
        return it != nullptr ? *it : blocks.end();
    }
    Blocks::iterator put_block(std::uintptr_t addr, const Block& b) {
        index.reserve_one(); // (may throw: before anything changed)
        const auto it = blocks.insert_or_assign(addr, b).first;
        index.put(addr, it);
        return it;
    }
    void erase_block(Blocks::iterator it) {
        index.take(it->first);
        blocks.erase(it);
    }

    /// The block that contains `addr`, or end().
    Blocks::iterator containing(std::uintptr_t addr) {
        auto it = blocks.upper_bound(addr);
        if (it == blocks.begin())
            return blocks.end();
        --it;
        return addr < it->first + it->second.size ? it : blocks.end();
    }

    bool adjacent_free(Blocks::iterator a, Blocks::iterator b) const {
        return a->second.seg == b->second.seg && a->first + a->second.size == b->first &&
               a->second.state == State::free && b->second.state == State::free;
    }

    /// try_merge_blocks with both neighbours of a free block; returns the merged block and adds
    /// the subsumed blocks and bytes to *merged / *merged_bytes.
    Blocks::iterator merge(Blocks::iterator it, std::int64_t* merged, std::int64_t* merged_bytes) {
        if (it != blocks.begin()) {
            auto prev = std::prev(it);
            if (adjacent_free(prev, it)) {
                *merged += 1;
                *merged_bytes += static_cast<std::int64_t>(prev->second.size);
                prev->second.size += it->second.size;
                erase_block(it);
                it = prev;
            }
        }
        auto next = std::next(it);
        if (next != blocks.end() && adjacent_free(it, next)) {
            *merged += 1;
            *merged_bytes += static_cast<std::int64_t>(next->second.size);
            it->second.size += next->second.size;
            erase_block(next);
        }
        return it;
    }

    // ---- segments ---------------------------------------------------------------------------

    // alloc_block
    void segment_alloc(std::uintptr_t addr, std::size_t size, std::uintptr_t stream, MempoolId pool, RequestSite site) {
        if (size == 0 || containing(addr) != blocks.end()) {
            ++mismatches;
            return;
        }
        auto seg = std::make_unique<Segment>();
        seg->base = addr;
        seg->size = size;
        seg->small = size <= kSmallBuffer; // get_allocation_size: 2 MiB only for the small pool
        seg->stream = stream;
        seg->pool = pool;
        Segment* s = seg.get();
        segments[addr] = std::move(seg);
        put_block(addr, Block{size, 0, State::free, s});
        increase(st.segment, s->small, 1);
        increase(st.reserved_bytes, s->small, static_cast<std::int64_t>(size));
        if (size >= max_split())
            st.oversize_segments.increase(1);
        st.num_device_alloc += 1;
        pool_reserved(*s, static_cast<std::int64_t>(size));
        reserved_grew = true;
        if (listener)
            listener->on_segment_alloc(addr, size, site);
    }

    // release_block: only a wholly free segment is given back
    void segment_free(std::uintptr_t addr, std::size_t size) {
        auto sit = segments.find(addr);
        auto it = find_block(addr);
        if (sit == segments.end() || it == blocks.end() || it->second.state != State::free ||
            it->second.size != sit->second->size) {
            ++mismatches;
            return;
        }
        Segment& s = *sit->second;
        st.num_device_free += 1;
        decrease(st.segment, s.small, 1);
        decrease(st.reserved_bytes, s.small, static_cast<std::int64_t>(s.size));
        if (s.size >= max_split())
            st.oversize_segments.decrease(1);
        pool_reserved(s, -static_cast<std::int64_t>(s.size));
        const std::size_t released = s.size;
        erase_block(it);
        segments.erase(sit);
        if (listener)
            listener->on_segment_free(addr, size == 0 ? released : size);
    }

    Segment* group(std::uintptr_t stream, MempoolId pool, bool small) {
        auto& slot = expandable[GroupKey{stream, pool, small}];
        if (!slot) {
            slot = std::make_unique<Segment>();
            slot->small = small;
            slot->expandable = true;
            slot->stream = stream;
            slot->pool = pool;
        }
        return slot.get();
    }

    // map_block: the newly mapped pages are one free block, merged with free neighbours
    void segment_map(std::uintptr_t addr, std::size_t size, std::uintptr_t stream, MempoolId pool, RequestSite site) {
        if (size == 0 || containing(addr) != blocks.end()) {
            ++mismatches;
            return;
        }
        // Small-pool pages are 2 MiB and a small request maps at most two; the large pool's
        // pages are 20 MiB.
        Segment* s = group(stream, pool, size < kLargeBuffer);
        auto it = put_block(addr, Block{size, 0, State::free, s});
        std::int64_t merged = 0, merged_bytes = 0;
        merge(it, &merged, &merged_bytes);
        increase(st.reserved_bytes, s->small, static_cast<std::int64_t>(size));
        st.num_device_alloc += 1;
        pool_reserved(*s, static_cast<std::int64_t>(size));
        reserved_grew = true;
        if (listener)
            listener->on_segment_map(addr, size, site);
    }

    // unmap_block: whole free pages leave the free block they lie in
    void segment_unmap(std::uintptr_t addr, std::size_t size) {
        auto it = containing(addr);
        if (it == blocks.end() || it->second.state != State::free || !it->second.seg->expandable ||
            addr + size > it->first + it->second.size) {
            ++mismatches;
            return;
        }
        Block b = it->second;
        const std::uintptr_t start = it->first;
        erase_block(it);
        if (addr > start)
            put_block(start, Block{addr - start, 0, State::free, b.seg});
        const std::uintptr_t end = start + b.size;
        if (addr + size < end)
            put_block(addr + size, Block{end - (addr + size), 0, State::free, b.seg});
        decrease(st.reserved_bytes, b.seg->small, static_cast<std::int64_t>(size));
        st.num_device_free += 1;
        pool_reserved(*b.seg, -static_cast<std::int64_t>(size));
        if (listener)
            listener->on_segment_unmap(addr, size);
    }

    // ---- allocations ------------------------------------------------------------------------

    // malloc -> alloc_found_block
    std::size_t alloc(std::uintptr_t addr, std::size_t requested, std::uintptr_t stream, MempoolId, RequestSite site) {
        const std::size_t size = round(requested);
        auto it = find_block(addr);
        if (it == blocks.end() || it->second.state != State::free) {
            // Not where a free block starts: PyTorch split a block where its rules would not have
            // (its CUDA-graph checkpoint restore splits to a recorded layout) or an event was
            // missed. The block that contains the address ends there; the rest is free.
            ++mismatches;
            auto c = containing(addr);
            if (c == blocks.end() || c->first == addr)
                return 0;
            Block rest = c->second;
            rest.size = c->first + c->second.size - addr;
            rest.requested = 0;
            if (c->second.state != State::free)
                shrink_taken(c, rest.size);
            rest.state = State::free;
            c->second.size = addr - c->first;
            it = put_block(addr, rest);
        }
        Block& b = it->second;
        const bool exp = b.seg->expandable;
        if (b.size < size) { // cannot be: PyTorch found this block for the request
            ++mismatches;
            return 0;
        }
        const bool already_split = !exp && is_split(addr, b);
        if (should_split(b, size)) {
            const Block rest{b.size - size, 0, State::free, b.seg};
            b.size = size;
            put_block(addr + size, rest);
            if (already_split && !exp) {
                decrease(st.inactive_split_bytes, b.seg->small, static_cast<std::int64_t>(size));
            } else if (!exp) {
                increase(st.inactive_split_bytes, b.seg->small, static_cast<std::int64_t>(rest.size));
                increase(st.inactive_split, b.seg->small, 1);
            }
        } else if (already_split && !exp) {
            decrease(st.inactive_split_bytes, b.seg->small, static_cast<std::int64_t>(b.size));
            decrease(st.inactive_split, b.seg->small, 1);
        }
        b.state = State::allocated;
        b.requested = requested;
        const auto bytes = static_cast<std::int64_t>(b.size);
        increase(st.allocation, b.seg->small, 1);
        increase(st.allocated_bytes, b.seg->small, bytes);
        increase(st.active, b.seg->small, 1);
        increase(st.active_bytes, b.seg->small, bytes);
        increase(st.requested_bytes, b.seg->small, static_cast<std::int64_t>(requested));
        if (b.size >= max_split())
            st.oversize_allocations.increase(1);
        pool_allocated(*b.seg, bytes);
        if (reserved_grew) {
            reserved_grew = false;
            note_reserved_peak();
        }
        if (listener)
            listener->on_alloc(addr, b.size, requested, stream, site);
        return b.size;
    }

    /// An allocated or pending block is `by` bytes smaller than thought: its statistics follow.
    void shrink_taken(Blocks::iterator it, std::size_t by) {
        const Block& b = it->second;
        const auto d = static_cast<std::int64_t>(by);
        if (b.state == State::allocated) {
            decrease(st.allocated_bytes, b.seg->small, d);
            pool_allocated(*b.seg, -d);
        }
        decrease(st.active_bytes, b.seg->small, d);
    }

    // free: no longer allocated; still active until free_block
    void free_requested(std::uintptr_t addr) {
        auto it = find_block(addr);
        if (it == blocks.end() || it->second.state != State::allocated) {
            ++mismatches;
            return;
        }
        Block& b = it->second;
        b.state = State::pending;
        decrease(st.allocation, b.seg->small, 1);
        decrease(st.allocated_bytes, b.seg->small, static_cast<std::int64_t>(b.size));
        if (b.size >= max_split())
            st.oversize_allocations.decrease(1);
        pool_allocated(*b.seg, -static_cast<std::int64_t>(b.size));
        if (listener)
            listener->on_free_requested(addr, b.size, b.requested);
    }

    // free_block: merged back into the cached free blocks
    void free_completed(std::uintptr_t addr) {
        auto it = find_block(addr);
        if (it != blocks.end() && it->second.state == State::allocated) {
            ++mismatches; // the FREE_REQUESTED was missed
            free_requested(addr);
        }
        if (it == blocks.end() || it->second.state != State::pending) {
            ++mismatches;
            return;
        }
        const std::size_t size = it->second.size;
        const std::size_t requested = it->second.requested;
        Segment* seg = it->second.seg;
        it->second.state = State::free;
        it->second.requested = 0;
        std::int64_t merged = 0, merged_bytes = 0;
        it = merge(it, &merged, &merged_bytes);
        if (!seg->expandable) {
            // net_change_inactive_split_blocks / _size
            std::int64_t blocks_delta = -merged, bytes_delta = -merged_bytes;
            if (is_split(it->first, it->second)) {
                blocks_delta += 1;
                bytes_delta += static_cast<std::int64_t>(it->second.size);
            }
            if (blocks_delta > 0)
                increase(st.inactive_split, seg->small, blocks_delta);
            else if (blocks_delta < 0)
                decrease(st.inactive_split, seg->small, -blocks_delta);
            if (bytes_delta > 0)
                increase(st.inactive_split_bytes, seg->small, bytes_delta);
            else if (bytes_delta < 0)
                decrease(st.inactive_split_bytes, seg->small, -bytes_delta);
        }
        decrease(st.active, seg->small, 1);
        decrease(st.active_bytes, seg->small, static_cast<std::int64_t>(size));
        decrease(st.requested_bytes, seg->small, static_cast<std::int64_t>(requested));
        if (listener)
            listener->on_free_completed(addr, size, requested);
    }

    std::size_t largest_free() const {
        std::size_t largest = 0;
        for (const auto& [addr, b] : blocks)
            if (b.state == State::free)
                largest = std::max(largest, b.size);
        return largest;
    }

    void oom(std::size_t device_free, std::size_t rounded, std::uintptr_t, RequestSite site) {
        st.num_ooms += 1;
        if (!listener)
            return;
        OomInfo info;
        info.requested = rounded;
        info.rounded = rounded;
        info.allocation_size = allocation_size(rounded);
        info.device_free = device_free;
        info.allocated = st.allocated_bytes[stats::kAll].current;
        info.reserved = st.reserved_bytes[stats::kAll].current;
        info.largest_free_block = largest_free();
        listener->on_oom(info, site);
    }

    // ---- reading ----------------------------------------------------------------------------

    static BlockInfo info_of(std::uintptr_t addr, const Block& b) {
        BlockInfo i;
        i.address = addr;
        i.size = b.size;
        i.requested_size = b.requested;
        i.state = b.state == State::allocated ? BlockState::active_allocated
                  : b.state == State::pending ? BlockState::active_pending_free
                                              : BlockState::inactive;
        return i;
    }

    static void add_block(SegmentInfo& s, std::uintptr_t addr, const Block& b) {
        s.blocks.push_back(info_of(addr, b));
        s.total_size += b.size;
        if (b.state == State::allocated)
            s.allocated_size += b.size;
        if (b.state != State::free) {
            s.active_size += b.size;
            s.requested_size += b.requested;
        }
    }

    std::vector<SegmentInfo> snapshot() const {
        std::vector<SegmentInfo> out;
        const Segment* run = nullptr; // the expandable segment whose mapped range is being collected
        std::uintptr_t run_end = 0;
        for (const auto& [addr, b] : blocks) {
            const Segment* s = b.seg;
            if (s->expandable) {
                if (run != s || addr != run_end) {
                    out.emplace_back();
                    out.back().address = addr;
                    out.back().stream = s->stream;
                    out.back().is_small = s->small;
                    out.back().is_expandable = true;
                }
                run = s;
                run_end = addr + b.size;
            } else {
                if (addr == s->base) {
                    out.emplace_back();
                    out.back().address = addr;
                    out.back().stream = s->stream;
                    out.back().is_small = s->small;
                }
                run = nullptr;
            }
            add_block(out.back(), addr, b);
        }
        return out;
    }

    Lookup lookup(std::uintptr_t addr) const {
        Lookup l;
        auto it = blocks.upper_bound(addr);
        if (it == blocks.begin())
            return l;
        --it;
        if (addr >= it->first + it->second.size)
            return l;
        const Segment* s = it->second.seg;
        l.in_pool = true;
        l.block_address = it->first;
        l.block_size = it->second.size;
        l.is_block_start = addr == it->first && it->second.state == State::allocated;
        l.segment_base = s->expandable ? it->first : s->base;
        l.segment_size = s->expandable ? it->second.size : s->size;
        return l;
    }
};

TorchMirror::TorchMirror(TorchRules rules, PoolListener* listener)
    : impl_(std::make_unique<Impl>(std::move(rules), listener)) {
}
TorchMirror::~TorchMirror() = default;

#define GPUMEMPROF_MIRROR_LOCKED(...)                                                                                  \
    do {                                                                                                               \
        try {                                                                                                          \
            std::lock_guard lock(impl_->mutex);                                                                        \
            __VA_ARGS__;                                                                                               \
        } catch (...) {                                                                                                \
            ++impl_->mismatches;                                                                                       \
        }                                                                                                              \
    } while (0)

void TorchMirror::segment_alloc(std::uintptr_t addr, std::size_t size, std::uintptr_t stream, MempoolId pool,
                                RequestSite site) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->segment_alloc(addr, size, stream, pool, site));
}
void TorchMirror::segment_free(std::uintptr_t addr, std::size_t size) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->segment_free(addr, size));
}
void TorchMirror::segment_map(std::uintptr_t addr, std::size_t size, std::uintptr_t stream, MempoolId pool,
                              RequestSite site) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->segment_map(addr, size, stream, pool, site));
}
void TorchMirror::segment_unmap(std::uintptr_t addr, std::size_t size) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->segment_unmap(addr, size));
}
std::size_t TorchMirror::alloc(std::uintptr_t addr, std::size_t requested, std::uintptr_t stream, MempoolId pool,
                               RequestSite site) {
    std::size_t size = 0;
    GPUMEMPROF_MIRROR_LOCKED(size = impl_->alloc(addr, requested, stream, pool, site));
    return size;
}
void TorchMirror::free_requested(std::uintptr_t addr) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->free_requested(addr));
}
void TorchMirror::free_completed(std::uintptr_t addr) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->free_completed(addr));
}
void TorchMirror::oom(std::size_t device_free, std::size_t rounded, std::uintptr_t stream, RequestSite site) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->oom(device_free, rounded, stream, site));
}
void TorchMirror::set_untraced_counters(std::int64_t num_alloc_retries, std::int64_t num_sync_all_streams) {
    GPUMEMPROF_MIRROR_LOCKED(impl_->st.num_alloc_retries = num_alloc_retries;
                             impl_->st.num_sync_all_streams = num_sync_all_streams);
}
void TorchMirror::reset_peak_stats() {
    GPUMEMPROF_MIRROR_LOCKED(impl_->st.reset_peak(); impl_->peak_record = {}; impl_->note_reserved_peak());
}
void TorchMirror::reset_accumulated_stats() {
    GPUMEMPROF_MIRROR_LOCKED(impl_->st.reset_accumulated(); impl_->before_resets.reset_accumulated());
}
void TorchMirror::program_reset_peak() {
    GPUMEMPROF_MIRROR_LOCKED(impl_->keep_before_reset(true); impl_->st.reset_peak(); ++impl_->program_resets);
}
void TorchMirror::program_reset_accumulated() {
    GPUMEMPROF_MIRROR_LOCKED(impl_->keep_before_reset(false); impl_->st.reset_accumulated(); ++impl_->program_resets);
}
#undef GPUMEMPROF_MIRROR_LOCKED

stats::DeviceStats TorchMirror::stats() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->st;
}
stats::DeviceStats TorchMirror::whole_run_stats() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->whole_run();
}
int TorchMirror::program_resets() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->program_resets;
}
ReservedPeak TorchMirror::reserved_peak() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->peak_record;
}
std::vector<SegmentInfo> TorchMirror::snapshot() const {
    try {
        std::lock_guard lock(impl_->mutex);
        return impl_->snapshot();
    } catch (...) {
        return {};
    }
}
std::vector<PrivatePoolBytes> TorchMirror::private_pools() const {
    std::vector<PrivatePoolBytes> out;
    try {
        std::lock_guard lock(impl_->mutex);
        for (const auto& [id, p] : impl_->private_pools)
            out.push_back(p);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return out;
}
Lookup TorchMirror::lookup(std::uintptr_t addr) const {
    std::lock_guard lock(impl_->mutex);
    return impl_->lookup(addr);
}
std::int64_t TorchMirror::mismatches() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->mismatches;
}
std::size_t TorchMirror::largest_free_block() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->largest_free();
}
void TorchMirror::with_lock(const std::function<void()>& fn) const {
    std::lock_guard lock(impl_->mutex);
    fn();
}
void TorchMirror::lock_for_fork() {
    impl_->mutex.lock();
}
void TorchMirror::unlock_after_fork() {
    impl_->mutex.unlock();
}

} // namespace gpumemprof::pool
