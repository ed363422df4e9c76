// SPDX-License-Identifier: MIT
// DevicePool: PyTorch's DeviceCachingAllocator policy over a Backend (see device_pool.hpp).
#include "pool/device_pool.hpp"

#include "pool/expandable_segment.hpp"
#include "pool/rounding.hpp"
#include "stats/stat_fields.hpp"
#include "util/flat_map.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <tuple>
#include <utility>

namespace gpumemprof::pool {

namespace {

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

/// The block sets' nodes, recycled through a free list: an erase gives its node back, an insert
/// takes one. ensure_spares() fills it before a call changes anything, so that no insert made
/// after that reaches the heap (a host out-of-memory leaves the pool unchanged). Every set of a
/// pool holds Block* nodes, so they all have one node size; other sizes go to the heap.
class NodeCache {
public:
    NodeCache() = default;
    NodeCache(const NodeCache&) = delete;
    NodeCache& operator=(const NodeCache&) = delete;
    ~NodeCache() {
        while (head_ != nullptr) {
            Link* next = head_->next;
            ::operator delete(head_);
            head_ = next;
        }
    }

    std::size_t count() const { return count_; }

    void* take(std::size_t bytes) {
        if (bytes == node_size_ && head_ != nullptr) {
            Link* l = head_;
            head_ = l->next;
            --count_;
            return l;
        }
        if (node_size_ == 0 && bytes >= sizeof(Link))
            node_size_ = bytes; // the first set node ever allocated fixes the size kept here
        return ::operator new(bytes);
    }

    void give(void* p, std::size_t bytes) noexcept {
        if (bytes != node_size_) {
            ::operator delete(p);
            return;
        }
        head_ = ::new (p) Link{head_};
        ++count_;
    }

    /// Until count() >= n (may throw bad_alloc; the nodes obtained so far stay). The node size
    /// is known: the pool's constructor made and gave back one node.
    void fill(std::size_t n) {
        while (count_ < n)
            give(::operator new(node_size_), node_size_);
    }

private:
    struct Link {
        Link* next;
    };
    Link* head_ = nullptr;
    std::size_t count_ = 0;
    std::size_t node_size_ = 0;
};

template <typename T> struct NodeAlloc {
    using value_type = T;
    NodeCache* cache;
    explicit NodeAlloc(NodeCache* c) noexcept : cache(c) {}
    template <typename U> NodeAlloc(const NodeAlloc<U>& o) noexcept : cache(o.cache) {}
    T* allocate(std::size_t n) { return static_cast<T*>(cache->take(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { cache->give(p, n * sizeof(T)); }
    template <typename U> bool operator==(const NodeAlloc<U>& o) const noexcept { return cache == o.cache; }
};

using BlockSet = std::set<Block*, BlockCmp, NodeAlloc<Block*>>;

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

// BlockComparatorAddress: unmapped ranges of expandable segments, per stream by address.
struct BlockAddrCmp {
    bool operator()(const Block* a, const Block* b) const {
        if (a->stream != b->stream)
            return a->stream < b->stream;
        return a->ptr < b->ptr;
    }
};

struct BlockPool {
    explicit BlockPool(NodeCache* nodes)
        : blocks(BlockCmp{}, NodeAlloc<Block*>(nodes)), unmapped(BlockAddrCmp{}, NodeAlloc<Block*>(nodes)) {}
    BlockSet blocks;                                            ///< free blocks only
    std::set<Block*, BlockAddrCmp, NodeAlloc<Block*>> unmapped; ///< unmapped ranges of expandable segments
    bool is_small = false;
    std::uint64_t get_free_blocks_call_count = 0; ///< GC clock
    int stat_type = stats::kLargePool;
};

struct Segment {
    std::uintptr_t base = 0;
    std::size_t size = 0;
    std::uintptr_t stream = 0;
    BlockPool* pool = nullptr;
    Block* head = nullptr;                 ///< the block at `base`
    std::unique_ptr<ExpandableSegment> es; ///< set for an expandable segment (base/size: its range)
};

struct FenceGroup {
    FenceId id = 0;
    Block* head = nullptr;
};

constexpr std::size_t kOneExaByte = std::size_t{1} << 60;
constexpr std::size_t kBlockChunk = 256;
/// Fence cadence: a free records a new fence once this many bytes were freed since the last
/// one (or reserved/kFenceStepDivisor, whichever is larger), so that a miss finds an old enough
/// fence to wait for instead of one recorded at the miss (which waits for the whole queue).
constexpr std::size_t kMinFenceStep = std::size_t{2} << 20;
constexpr std::size_t kFenceStepDivisor = 8;
/// Upper bound of one wait on a miss; past it the pool grows instead (the device may be waiting
/// for something this process does after the allocation returns).
constexpr std::uint64_t kWaitLimitNs = 200'000'000;
/// A split of a cached block this many times the request or larger (three quarters or more of
/// it left over) waits for a freed block that fits whole (retire_before_split). Measured on a
/// recorded PyTorch loop with a side stream (bench/fenced_footprint.py): 4 keeps the reserved
/// peak within 1.1x of reuse at once with the device 1 ms and 4 ms behind; 8 does not at 4 ms
/// (1.24x).
constexpr std::size_t kSplitWaitRatio = 4;

std::int64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count();
}

} // namespace

struct DevicePool::Impl {
    Impl(Backend& b, PoolOptions o, PoolListener* l) : backend(b), options(std::move(o)), listener(l) {
        small.is_small = true;
        small.stat_type = stats::kSmallPool;
        large.is_small = false;
        large.stat_type = stats::kLargePool;
        max_split_size = options.conf.max_split_size;
        max_non_split_rounding = options.conf.max_non_split_rounding_size;
        set_fraction = options.conf.per_process_memory_fraction > 0.0;
        gc_enabled = set_fraction && options.conf.garbage_collection_threshold > 0.0;
        // torch: static_cast<int64_t>(max_split_size); SIZE_MAX reads -1.
        st.max_split_size = static_cast<std::int64_t>(max_split_size);
        spare_blocks.reserve(kBlockChunk);
        // One node made and given back: the cache learns the node size, and fill() can make more.
        Block seed;
        BlockSet(BlockCmp{}, NodeAlloc<Block*>(&nodes)).insert(&seed); // an empty set compares nothing
    }

    Backend& backend;
    PoolOptions options;
    PoolListener* listener;
    mutable std::mutex mu;

    NodeCache nodes; ///< before the sets: it outlives them (their nodes go back to it)
    BlockPool small{&nodes};
    BlockPool large{&nodes};
    util::FlatMap<Block*> active; ///< allocated + pending blocks by address (PyTorch's active_blocks)
    std::map<std::uintptr_t, Segment> segments;
    std::vector<std::unique_ptr<Block[]>> block_chunks;
    std::vector<Block*> spare_blocks;
    Block* unfenced_head = nullptr;
    Block* unfenced_tail = nullptr;
    std::size_t unfenced_bytes = 0;
    std::deque<FenceGroup> fenced; ///< oldest first
    PendingStats pending;
    std::uint64_t free_seq = 0; ///< frees so far that left a block pending

    stats::DeviceStats st;
    std::int64_t invalid_frees = 0;
    PoolCounters counters;
    ReservedPeak reserved_peak;
    std::size_t total_allocated_memory = 0; ///< bytes held from the backend (== reserved)

    std::size_t max_split_size = 0;
    std::size_t max_non_split_rounding = 0;
    bool set_fraction = false;
    bool gc_enabled = false;
    bool allowed_known = false;
    std::size_t allowed_memory_maximum = std::numeric_limits<std::size_t>::max();

    // ---- small helpers ------------------------------------------------------------------------

    template <typename F> static void for_types(const BlockPool& p, F&& f) {
        f(stats::kAll);
        f(p.stat_type);
    }

    BlockPool& pool_for(std::size_t rounded) { return rounded <= kSmallSize ? small : large; }

    void grow_spare_blocks() {
        auto chunk = std::make_unique<Block[]>(kBlockChunk);
        // Room for every block that exists, so recycle_block() never reallocates.
        spare_blocks.reserve((block_chunks.size() + 1) * kBlockChunk);
        block_chunks.reserve(block_chunks.size() + 1);
        for (std::size_t i = 0; i < kBlockChunk; ++i)
            spare_blocks.push_back(&chunk[i]);
        block_chunks.push_back(std::move(chunk));
    }

    /// Everything malloc/free may need, obtained before any state changes (may throw bad_alloc,
    /// which the public entry points turn into an error with the pool unchanged).
    /// A malloc can retire every pending block (each needs a set node unless it merges) and
    /// insert one split remainder; a free inserts at most one block; an erase gives its node
    /// back to the cache. So `pending + 2` cached nodes make every set insert of the call
    /// allocation-free, after the state began to change. The check is inline: on a pool hit
    /// everything is there already.
    void ensure_spares() {
        const auto need = static_cast<std::size_t>(pending.blocks.current) + 2;
        if (spare_blocks.size() < 2 || nodes.count() < need) [[unlikely]]
            grow_spares(need);
        active.reserve_one();
    }
    __attribute__((noinline)) void grow_spares(std::size_t nodes_needed) {
        if (spare_blocks.size() < 2)
            grow_spare_blocks();
        nodes.fill(nodes_needed);
    }

    Block* new_block() {
        if (spare_blocks.empty())
            grow_spare_blocks();
        Block* b = spare_blocks.back();
        spare_blocks.pop_back();
        *b = Block{};
        return b;
    }

    void recycle_block(Block* b) { spare_blocks.push_back(b); } // capacity covers every chunk block

    // Inserts take their node from `nodes`, erases give it back (NodeAlloc); the unmapped sets
    // hold the same nodes as the free sets (std::set nodes do not depend on the comparator).
    void set_insert(BlockPool& pool, Block* b) { b->pos = pool.blocks.insert(b).first; }
    void set_erase(BlockPool& pool, BlockSet::iterator it) { pool.blocks.erase(it); }
    void unmapped_insert(BlockPool& pool, Block* b) { pool.unmapped.insert(b); }
    void unmapped_erase(BlockPool& pool, Block* b) {
        if (auto it = pool.unmapped.find(b); it != pool.unmapped.end())
            pool.unmapped.erase(it);
    }

    // BlockPool::insert_into_blocks: also stamps the GC age base.
    void insert_free(BlockPool& pool, Block* b) {
        b->state = BState::free;
        b->gc_count_base = pool.get_free_blocks_call_count;
        set_insert(pool, b);
    }

    std::size_t allowed() {
        if (!allowed_known) {
            std::size_t free_b = 0, total_b = 0;
            if (backend.memory_info(&free_b, &total_b) == kSuccess)
                allowed_memory_maximum =
                    static_cast<std::size_t>(options.conf.per_process_memory_fraction * static_cast<double>(total_b));
            allowed_known = true; // on failure stay unlimited rather than ask on every miss
        }
        return allowed_memory_maximum;
    }

    // ---- PyTorch policy -----------------------------------------------------------------------

    // get_free_block: best fit on the same stream, with the two oversize rules. The block stays in
    // the free set (end() when none fits): alloc_found_block may keep its node for the remainder.
    BlockSet::iterator find_free_block(BlockPool& pool, std::uintptr_t stream, std::size_t size) {
        Block key;
        key.stream = stream;
        key.size = size;
        key.ptr = 0;
        auto it = pool.blocks.lower_bound(&key);
        if (it == pool.blocks.end() || (*it)->stream != stream)
            return pool.blocks.end();
        if ((*it)->es != nullptr)
            it = skip_growable_tail(pool, it, stream);
        const Block* b = *it;
        // A non-oversize request never takes an oversize block (it would be split or wasted).
        if (size < max_split_size && b->size >= max_split_size)
            return pool.blocks.end();
        // An oversize request takes an unsplit block at most max_non_split_rounding larger.
        if (size >= max_split_size && b->size >= size + max_non_split_rounding)
            return pool.blocks.end();
        return it;
    }

    /// PyTorch's get_free_block counts its calls for the garbage collector's reuse interval.
    void count_lookup(BlockPool& pool) const {
        if (gc_enabled)
            ++pool.get_free_blocks_call_count; // block reuse interval is only tracked for GC
    }

    /// find_free_block, the block taken out of the free set.
    Block* get_free_block(BlockPool& pool, std::uintptr_t stream, std::size_t size) {
        count_lookup(pool);
        const auto it = find_free_block(pool, stream, size);
        if (it == pool.blocks.end())
            return nullptr;
        Block* b = *it;
        set_erase(pool, it);
        return b;
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

    // should_split: small pool keeps any remainder of >= 512 B; large pool splits only non-oversize
    // requests and only when more than kSmallSize would remain (smaller tails stay as waste).
    bool should_split(const Block* b, std::size_t size) const {
        const std::size_t remaining = b->size - size;
        if (b->pool->is_small || expandable())
            return remaining >= kMinBlockSize;
        return size < max_split_size && remaining > kSmallSize;
    }

    void note_driver_error(int code) {
        try {
            ++counters.driver_errors[code];
        } catch (...) {
            ++counters.host_failures;
        }
    }

    // alloc_block: one new segment from the backend (not put in the free set: the caller hands it
    // out at once). isRetry counts num_alloc_retries even if the attempt then fails.
    // With expandable segments: map pages for `rounded` bytes instead (handed out like a found block).
    Block* alloc_block(BlockPool& pool, std::uintptr_t stream, std::size_t alloc_size, bool is_retry, int* err,
                       std::size_t rounded = 0) {
        if (is_retry)
            ++st.num_alloc_retries;
        if (set_fraction && total_allocated_memory + alloc_size > allowed()) {
            *err = kOutOfMemory; // the per-process limit fails without asking the device
            return nullptr;
        }
        if (expandable())
            return try_allocate_expandable_block(pool, stream, rounded, err);
        std::uintptr_t ptr = 0;
        const int rc = backend.allocate(alloc_size, &ptr);
        if (rc != kSuccess) {
            if (rc != kOutOfMemory)
                note_driver_error(rc);
            *err = rc;
            return nullptr;
        }
        Segment* seg = nullptr;
        try {
            seg = &segments.try_emplace(ptr).first->second;
        } catch (...) {
            ++counters.host_failures;
            backend.release(ptr, alloc_size);
            *err = kOutOfMemory;
            return nullptr;
        }
        Block* b = new_block();
        b->ptr = ptr;
        b->size = alloc_size;
        b->stream = stream;
        b->pool = &pool;
        b->seg = seg;
        *seg = Segment{ptr, alloc_size, stream, &pool, b};
        total_allocated_memory += alloc_size;
        for_types(pool, [&](int t) {
            st.segment[t].increase(1);
            st.reserved_bytes[t].increase(static_cast<std::int64_t>(alloc_size));
        });
        if (alloc_size >= max_split_size)
            st.oversize_segments.increase(1);
        ++st.num_device_alloc;
        if (listener)
            listener->on_segment_alloc(ptr, alloc_size);
        return b;
    }

    // alloc_found_block: optional split (front part handed out, tail stays cached), stats.
    // `pos`: b's place in its free set, or end() when b is in none (then it stays out).
    Block* alloc_found_block(Block* b, std::size_t size, std::size_t orig_size, bool split, BlockSet::iterator pos) {
        BlockPool& pool = *b->pool;
        const bool already_split = b->is_split();
        const bool in_set = pos != pool.blocks.end();
        if (in_set && !split)
            set_erase(pool, pos);
        if (split) {
            Block* remaining = b;
            b = new_block();
            b->ptr = remaining->ptr;
            b->size = size;
            b->stream = remaining->stream;
            b->pool = &pool;
            b->seg = remaining->seg;
            b->es = remaining->es;
            b->prev = remaining->prev;
            if (b->prev)
                b->prev->next = b;
            else
                b->seg->head = b;
            b->next = remaining;
            remaining->prev = b;
            remaining->ptr += size;
            remaining->size -= size;
            if (in_set)
                refresh_free(pool, pos, false); // the remainder keeps the found block's node
            else
                insert_free(pool, remaining);
            if (b->es != nullptr) {
                // Expandable blocks stay out of inactive_split (their free pages can always go back).
            } else if (already_split) {
                // An already-split inactive block shrinks by `size`; the count is unchanged.
                for_types(pool, [&](int t) { st.inactive_split_bytes[t].decrease(static_cast<std::int64_t>(size)); });
            } else {
                // A previously unsplit block now leaves one inactive split remainder.
                for_types(pool, [&](int t) {
                    st.inactive_split_bytes[t].increase(static_cast<std::int64_t>(remaining->size));
                    st.inactive_split[t].increase(1);
                });
            }
        } else if (already_split && b->es == nullptr) {
            // An inactive split block becomes active as a whole.
            for_types(pool, [&](int t) {
                st.inactive_split_bytes[t].decrease(static_cast<std::int64_t>(b->size));
                st.inactive_split[t].decrease(1);
            });
        }
        b->state = BState::allocated;
        b->requested = orig_size;
        active.put(b->ptr, b);
        const auto bsize = static_cast<std::int64_t>(b->size);
        const auto req = static_cast<std::int64_t>(orig_size);
        for_types(pool, [&](int t) {
            st.allocation[t].increase(1);
            st.allocated_bytes[t].increase(bsize);
            st.active[t].increase(1);
            st.active_bytes[t].increase(bsize);
            st.requested_bytes[t].increase(req);
        });
        if (b->size >= max_split_size)
            st.oversize_allocations.increase(1);
        if (listener)
            listener->on_alloc(b->ptr, b->size, orig_size, b->stream);
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
        if (!src->mapped) {
            unmapped_erase(pool, src);
        } else if (auto it = pool.blocks.find(src); it != pool.blocks.end()) {
            set_erase(pool, it);
        }
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

    // free_block: the free completes: merge with free neighbours, back into the cache, stats.
    // (active/requested already dropped at the free request: free_locked.) A cached neighbour
    // takes b in and keeps its set node (refresh_free), so that a free next to its request's
    // remainder usually changes no set. Returns the merged block: b, or the neighbour.
    Block* free_block(Block* b) {
        if (listener)
            listener->on_free_completed(b->ptr, b->size, b->requested);
        BlockPool& pool = *b->pool;
        active.take(b->ptr); // before merging moves ptr
        std::int64_t net_blocks = 0;
        std::int64_t net_bytes = 0;
        const auto merged = [&](std::size_t subsumed) {
            if (subsumed > 0) {
                net_blocks -= 1;
                net_bytes -= static_cast<std::int64_t>(subsumed);
            }
        };
        // A cached neighbour (free and mapped: in the set at its pos) takes b in; the other one,
        // if cached too, is taken out of the set first, while every key there is still in order.
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
            const bool with_other = detach_mergeable(b, other, pool);
            merged(into->size); // as if b had taken `into` in
            absorb(into, b);    // b is recycled
            if (with_other)
                merged(absorb(into, other));
            refresh_free(pool, into->pos, true);
            result = into;
        } else {
            insert_free(pool, b); // no neighbour is cached: nothing to merge
        }
        if (result->is_split()) {
            net_blocks += 1;
            net_bytes += static_cast<std::int64_t>(result->size);
        }
        if (result->es != nullptr)
            net_blocks = net_bytes = 0; // expandable blocks stay out of inactive_split
        for_types(pool, [&](int t) {
            if (net_blocks > 0)
                st.inactive_split[t].increase(net_blocks);
            else if (net_blocks < 0)
                st.inactive_split[t].decrease(-net_blocks);
            if (net_bytes > 0)
                st.inactive_split_bytes[t].increase(net_bytes);
            else if (net_bytes < 0)
                st.inactive_split_bytes[t].decrease(-net_bytes);
        });
        return result;
    }

    // release_block: give a whole cached segment back (cudaFree).
    void release_block(Block* b) {
        BlockPool& pool = *b->pool;
        ++st.num_device_free;
        if (listener)
            listener->on_segment_free(b->ptr, b->size);
        auto it = pool.blocks.find(b);
        if (it != pool.blocks.end())
            set_erase(pool, it);
        // An error leaves nothing we could do differently; it is counted for the report.
        if (const int rc = backend.release(b->ptr, b->size); rc != kSuccess)
            note_driver_error(rc);
        total_allocated_memory -= b->size;
        for_types(pool, [&](int t) {
            st.segment[t].decrease(1);
            st.reserved_bytes[t].decrease(static_cast<std::int64_t>(b->size));
        });
        if (b->size >= max_split_size)
            st.oversize_segments.decrease(1);
        segments.erase(b->seg->base);
        recycle_block(b);
    }

    // release_available_cached_blocks: only with max_split_size set; free one oversize block big
    // enough, else the largest oversize blocks of this stream until enough bytes went back.
    bool release_available_cached_blocks(BlockPool& pool, std::uintptr_t stream, std::size_t size) {
        if (max_split_size == std::numeric_limits<std::size_t>::max() || expandable())
            return false; // every block is expandable then, and those are never released here
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
                    release_block(b);
                }
                if (is_first)
                    break;
            }
            return released >= key.size;
        }
        if ((*it)->is_split())
            return false;
        release_block(*it);
        return true;
    }

    // release_blocks: every cached unsplit block of the pool goes back to the device.
    void release_blocks(BlockPool& pool) {
        auto it = pool.blocks.begin();
        while (it != pool.blocks.end()) {
            Block* b = *it;
            ++it;
            if (b->es != nullptr)
                continue; // release_expandable_blocks below
            if (!b->is_split())
                release_block(b);
        }
        release_expandable_blocks(pool);
    }

    // ---- expandable segments (PyTorch's "Note [Expandable Segments]") ---------------------------
    // Per stream and pool one ExpandableSegment; its address range is a chain of blocks like a
    // segment's, the unmapped parts being free blocks with mapped == false kept in pool.unmapped.
    // Growing maps pages at the end of a free run and merges; empty_cache() (and the last retry
    // before an out-of-memory) unmaps the whole free pages. reserved_bytes follows the mapped bytes;
    // num_device_alloc/num_device_free count map/unmap operations; segment counts stay 0.

    bool expandable() const { return options.conf.expandable_segments && options.mode == Mode::caching; }

    // get_free_block's best fit in an expandable segment: among equally good candidates, take the one
    // that leaves the growable end (a free block followed by unmapped space) for a later request.
    BlockSet::iterator skip_growable_tail(BlockPool& pool, BlockSet::iterator it, std::uintptr_t stream) {
        const auto growable = [](const Block* b) {
            return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
        };
        auto next = std::next(it);
        while ((*it)->es != nullptr && next != pool.blocks.end() && (*next)->stream == stream &&
               growable(*next) < growable(*it))
            it = next++;
        return it;
    }

    static bool allocatable(const Block* b) { return b != nullptr && b->state == BState::free; }

    // find_expandable_block: the lowest address, in this stream's segments, where free and unmapped
    // blocks together give `size` bytes of room; a new segment when none has room.
    Block* find_expandable_block(BlockPool& pool, std::uintptr_t stream, std::size_t size, int* err) {
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
        if (std::size_t gran = 0; backend.vmm_granularity(&gran) == kSuccess && gran > 0 && page % gran != 0)
            page = (page + gran - 1) / gran * gran;
        std::size_t free_b = 0, total_b = 0;
        if (const int rc = backend.memory_info(&free_b, &total_b); rc != kSuccess) {
            *err = rc;
            return nullptr;
        }
        const std::size_t address_space = total_b + total_b / 8;
        std::unique_ptr<ExpandableSegment> es;
        if (const int rc = ExpandableSegment::create(backend, page, (address_space + page - 1) / page, &es);
            rc != kSuccess) {
            *err = rc;
            return nullptr;
        }
        Block* b = new_block();
        b->ptr = es->base();
        b->size = es->size();
        b->stream = stream;
        b->pool = &pool;
        b->es = es.get();
        b->mapped = false;
        try {
            auto [it, inserted] = segments.try_emplace(b->ptr);
            b->seg = &it->second;
            try {
                unmapped_insert(pool, b);
            } catch (...) {
                segments.erase(it);
                throw;
            }
        } catch (...) {
            es->release();
            recycle_block(b);
            *err = kOutOfMemory;
            return nullptr;
        }
        *b->seg = Segment{b->ptr, b->size, stream, &pool, b, std::move(es)};
        return b;
    }

    // map_block: back the first `size` bytes of the unmapped block `to_map` with pages, merge the
    // mapped part with free neighbours and put it in the free set.
    bool map_block(Block* to_map, std::size_t size, int* err) {
        std::size_t mapped = 0;
        if (const int rc = to_map->es->map(to_map->ptr, size, &mapped); rc != kSuccess) {
            *err = rc;
            return false;
        }
        BlockPool& pool = *to_map->pool;
        const std::uintptr_t first = to_map->ptr;
        if (mapped < to_map->size) {
            Block* rest = new_block(); // spares were ensured for this request
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
            unmapped_erase(pool, to_map);
        }
        to_map->mapped = true;
        try_merge(to_map, to_map->prev, pool);
        try_merge(to_map, to_map->next, pool);
        insert_free(pool, to_map);
        total_allocated_memory += mapped;
        for_types(pool, [&](int t) { st.reserved_bytes[t].increase(static_cast<std::int64_t>(mapped)); });
        ++st.num_device_alloc;
        if (listener)
            listener->on_segment_map(first, mapped);
        return true;
    }

    // try_allocate_expandable_block: map just enough pages for `size` bytes, grow the candidate
    // run (free -> unmapped -> ...) until it holds `size`, take it out of the free set.
    Block* try_allocate_expandable_block(BlockPool& pool, std::uintptr_t stream, std::size_t size, int* err) {
        Block* c = find_expandable_block(pool, stream, size, err);
        if (c == nullptr)
            return nullptr;
        if (!c->mapped && !map_block(c, std::min(c->size, size), err))
            return nullptr;
        while (c->size < size) {
            Block* n = c->next; // unmapped: map it and merge c into it
            if (!map_block(n, std::min(size - c->size, n->size), err))
                return nullptr;
            c = n;
        }
        if (auto it = pool.blocks.find(c); it != pool.blocks.end())
            set_erase(pool, it);
        return c;
    }

    // unmap_block: give back the whole pages inside the free block `b`; what is left of it on
    // either side stays a free mapped block.
    void unmap_block(Block* b) {
        std::uintptr_t first = 0;
        std::size_t unmapped = 0;
        if (b->es->whole_pages_bytes(b->ptr, b->size) == 0)
            return;
        ensure_spares(); // up to two new blocks below
        BlockPool& pool = *b->pool;
        b->es->unmap(b->ptr, b->size, &first, &unmapped);
        if (unmapped == 0)
            return;
        if (auto it = pool.blocks.find(b); it != pool.blocks.end())
            set_erase(pool, it);
        const auto carve = [&](std::uintptr_t ptr, std::size_t size, Block* prev, Block* next) {
            Block* f = new_block();
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
            insert_free(pool, f);
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
        try_merge(b, b->prev, pool);
        try_merge(b, b->next, pool);
        unmapped_insert(pool, b);
        total_allocated_memory -= unmapped;
        for_types(pool, [&](int t) { st.reserved_bytes[t].decrease(static_cast<std::int64_t>(unmapped)); });
        ++st.num_device_free;
        if (listener)
            listener->on_segment_unmap(first, unmapped);
    }

    // release_blocks' part for expandable segments: unmap the free pages, drop a segment that became
    // wholly unmapped. The device must be past every use of the pages first (cuMemUnmap does not
    // wait as cudaFree does): a fence over all streams, which during a capture cannot be had.
    void release_expandable_blocks(BlockPool& pool) {
        bool any = false;
        for (const Block* b : pool.blocks)
            if (b->es != nullptr && b->es->whole_pages_bytes(b->ptr, b->size) > 0) {
                any = true;
                break;
            }
        if (!any || !device_idle())
            return;
        std::vector<Block*> to_unmap; // unmapping changes the free set: collect first
        for (Block* b : pool.blocks)
            if (b->es != nullptr)
                to_unmap.push_back(b);
        for (Block* b : to_unmap) {
            unmap_block(b);
            if (b->prev == nullptr && b->next == nullptr && !b->mapped)
                release_expandable_segment(b);
        }
    }

    bool device_idle() {
        const FenceId f = backend.fence_record();
        if (f == 0)
            return false;
        const bool ok = backend.fence_wait(f);
        backend.fence_release(f);
        return ok;
    }

    void release_expandable_segment(Block* b) {
        BlockPool& pool = *b->pool;
        unmapped_erase(pool, b);
        const std::uintptr_t base = b->seg->base;
        b->seg->es->release();
        segments.erase(base);
        recycle_block(b);
    }

    /// One SegmentInfo per contiguous mapped range of `s`, as PyTorch's snapshot reports them.
    void snapshot_expandable(const Segment& s, std::vector<SegmentInfo>& out) const {
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

    /// The contiguous mapped run of blocks around `b` (one "segment" in PyTorch's snapshot).
    static std::pair<std::uintptr_t, std::size_t> mapped_run(const Block* b) {
        const Block* first = b;
        while (first->prev != nullptr && first->prev->mapped)
            first = first->prev;
        std::size_t size = 0;
        for (const Block* x = first; x != nullptr && x->mapped; x = x->next)
            size += x->size;
        return {first->ptr, size};
    }

    // ---- deferred frees (replaces record_stream events) ---------------------------------------

    void retire_group(Block* head) {
        while (head != nullptr) {
            Block* next = head->pending_next;
            retire_block(head);
            head = next;
        }
    }

    /// A pending block becomes reusable (its list links are the caller's business).
    void retire_block(Block* b) {
        b->pending_next = nullptr;
        pending.bytes.decrease(static_cast<std::int64_t>(b->size));
        pending.blocks.decrease(1);
        free_block(b);
    }

    /// One fence for every unfenced pending block. fence_record() == 0: they stay unfenced.
    void fence_unfenced() {
        if (unfenced_head == nullptr)
            return;
        const auto t0 = std::chrono::steady_clock::now();
        const FenceId id = backend.fence_record();
        counters.fence_ns += elapsed_ns(t0);
        if (id == 0)
            return;
        ++counters.fences_recorded;
        try {
            fenced.push_back(FenceGroup{id, unfenced_head});
        } catch (...) {
            backend.fence_release(id);
            return;
        }
        unfenced_head = unfenced_tail = nullptr;
        unfenced_bytes = 0;
    }

    /// The fenced groups up to and including `index` are done: retire them, oldest first.
    void retire_front(std::size_t index) {
        for (std::size_t i = 0; i <= index; ++i) {
            const FenceGroup g = fenced.front();
            fenced.pop_front();
            retire_group(g.head);
            backend.fence_release(g.id);
        }
    }

    /// Could a block of this group, once free, be (part of) a block that serves `rounded` bytes
    /// on `stream` from `pool`? Same pool, same stream, a segment large enough.
    static bool group_may_serve(const FenceGroup& g, const BlockPool& pool, std::uintptr_t stream,
                                std::size_t rounded) {
        for (const Block* b = g.head; b != nullptr; b = b->pending_next)
            if (b->pool == &pool && b->stream == stream && b->seg->size >= rounded)
                return true;
        return false;
    }

    /// A miss while blocks wait: retire what the device has passed; then wait (bounded) for the
    /// oldest fence whose blocks could serve the request, and for the next, until a cached block
    /// fits or no pending block could help. Returns the block, or nullptr (the pool grows).
    Block* reclaim_pending(BlockPool& pool, std::uintptr_t stream, std::size_t rounded) {
        Block* b = nullptr;
        if (!fenced.empty() && process_fences_locked() && (b = get_free_block(pool, stream, rounded)))
            return b;
        if (unfenced_head != nullptr) {
            fence_unfenced();
            if (process_fences_locked() && (b = get_free_block(pool, stream, rounded)))
                return b;
        }
        for (;;) {
            std::size_t index = 0;
            while (index < fenced.size() && !group_may_serve(fenced[index], pool, stream, rounded))
                ++index;
            if (index == fenced.size())
                return nullptr;
            if (!wait_and_retire(index))
                return nullptr;
            if ((b = get_free_block(pool, stream, rounded)))
                return b;
        }
    }

    /// The cached block that would serve `rounded` bytes on `stream` (find_free_block's choice,
    /// not counted as a lookup), or nullptr.
    const Block* best_fit(BlockPool& pool, std::uintptr_t stream, std::size_t rounded) {
        const auto it = find_free_block(pool, stream, rounded);
        return it != pool.blocks.end() ? *it : nullptr;
    }

    /// Would `c`, once free, serve the request whole (no split)?
    bool serves_whole(const Block* c, const BlockPool& pool, std::uintptr_t stream, std::size_t rounded) const {
        return c->pool == &pool && c->stream == stream && c->size >= rounded && !should_split(c, rounded);
    }

    /// Index of the oldest fenced group holding a block that serves the request whole, else
    /// fenced.size(); `unfenced` tells whether an unfenced block does.
    std::size_t find_whole_fit(const BlockPool& pool, std::uintptr_t stream, std::size_t rounded,
                               bool* unfenced) const {
        *unfenced = false;
        for (const Block* c = unfenced_head; c != nullptr && !*unfenced; c = c->pending_next)
            *unfenced = serves_whole(c, pool, stream, rounded);
        for (std::size_t i = 0; i < fenced.size(); ++i)
            for (const Block* c = fenced[i].head; c != nullptr; c = c->pending_next)
                if (serves_whole(c, pool, stream, rounded))
                    return i;
        return fenced.size();
    }

    /// Freed blocks wait and the best cached fit would be split. PyTorch, reusing at once, would
    /// have the freed blocks back already; a split made instead cuts a larger block for good and
    /// the pool grows later (a recorded PyTorch loop with a side stream grew 1.5x that way). So
    /// first retire what the device has passed (a query of the oldest fences' events). If the
    /// split would still leave most of a block unused (the best fit is kSplitWaitRatio times the
    /// request or more, or there is none) and a waiting block would serve the request whole,
    /// fence it if it is not yet and wait (bounded) for it. Fences are recorded only there and
    /// by the free path's cadence: each costs a driver call per stream of the program.
    /// Returns true when a wait ran out of time (the miss path then does not wait again).
    bool retire_before_split(BlockPool& pool, std::uintptr_t stream, std::size_t rounded) {
        const Block* best = best_fit(pool, stream, rounded);
        if (best != nullptr && !should_split(best, rounded))
            return false;
        if (!fenced.empty() && process_fences_locked())
            best = best_fit(pool, stream, rounded);
        if (best != nullptr && (!should_split(best, rounded) || best->size < kSplitWaitRatio * rounded))
            return false;
        bool in_unfenced = false;
        std::size_t index = find_whole_fit(pool, stream, rounded, &in_unfenced);
        if (index == fenced.size() && in_unfenced) {
            fence_unfenced();
            index = find_whole_fit(pool, stream, rounded, &in_unfenced);
        }
        return index < fenced.size() && !wait_and_retire(index);
    }

    /// Wait (bounded) for fenced group `index`; when it is done, retire it and every older one.
    bool wait_and_retire(std::size_t index) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool done = backend.fence_wait_for(fenced[index].id, kWaitLimitNs);
        ++counters.fence_waits;
        counters.wait_ns += elapsed_ns(t0);
        if (!done) {
            ++counters.wait_timeouts;
            return false;
        }
        retire_front(index);
        return true;
    }

    /// Take `b` out of whichever pending list holds it (fenced group or unfenced).
    bool unlink_pending(Block* b) {
        for (std::size_t i = 0; i < fenced.size(); ++i) {
            Block** link = &fenced[i].head;
            while (*link != nullptr && *link != b)
                link = &(*link)->pending_next;
            if (*link == b) {
                *link = b->pending_next;
                if (fenced[i].head == nullptr) { // nothing left behind this fence
                    backend.fence_release(fenced[i].id);
                    fenced.erase(fenced.begin() + static_cast<std::ptrdiff_t>(i));
                }
                return true;
            }
        }
        Block* prev = nullptr;
        for (Block* c = unfenced_head; c != nullptr; prev = c, c = c->pending_next) {
            if (c != b)
                continue;
            (prev ? prev->pending_next : unfenced_head) = c->pending_next;
            if (unfenced_tail == c)
                unfenced_tail = prev;
            unfenced_bytes -= c->size;
            return true;
        }
        return false;
    }

    /// Retire every pending block freed at or before free number `mark` (the device is past it).
    void retire_through_locked(std::uint64_t mark) {
        while (!fenced.empty()) {
            FenceGroup& g = fenced.front();
            while (g.head != nullptr && g.head->free_seq <= mark) {
                Block* b = g.head;
                g.head = b->pending_next;
                retire_block(b);
            }
            if (g.head != nullptr)
                return; // later frees wait for this fence
            backend.fence_release(g.id);
            fenced.pop_front();
        }
        while (unfenced_head != nullptr && unfenced_head->free_seq <= mark) {
            Block* b = unfenced_head;
            unfenced_head = b->pending_next;
            unfenced_bytes -= b->size;
            retire_block(b);
        }
        if (unfenced_head == nullptr)
            unfenced_tail = nullptr;
    }

    /// process_events: oldest fence first, stop at the first that is not done. Returns whether
    /// any block was retired.
    bool process_fences_locked() {
        bool any = false;
        while (!fenced.empty()) {
            ++counters.fence_polls;
            const auto t0 = std::chrono::steady_clock::now();
            const bool done = backend.fence_done(fenced.front().id);
            counters.poll_ns += elapsed_ns(t0);
            if (!done)
                break;
            retire_front(0);
            any = true;
        }
        return any;
    }

    // synchronize_and_free_events: wait for every outstanding fence (fencing the unfenced first).
    void synchronize_and_free_fences() {
        ++st.num_sync_all_streams;
        fence_unfenced();
        while (!fenced.empty()) {
            if (!backend.fence_wait(fenced.front().id))
                break; // waiting is not allowed now: the rest stays pending
            retire_front(0);
        }
        if (unfenced_head != nullptr && fenced.empty() && backend.synchronize()) {
            // No fence could be recorded (the driver refused an event): a synchronisation of the
            // whole context shows the device past every free so far. Without it these blocks would
            // stay pending for good and the program would run out of memory it has freed.
            retire_group(unfenced_head);
            unfenced_head = unfenced_tail = nullptr;
        }
    }

    // release_cached_blocks (empty cache): sync fences, then free large then small unsplit blocks.
    void release_cached_blocks() {
        synchronize_and_free_fences();
        release_blocks(large);
        release_blocks(small);
    }

    // garbage_collect_cached_blocks: free aged unsplit large-pool blocks until reserved drops below
    // threshold * allowed; each pass frees every block at least as old as the average, without
    // stopping at the target, so GC does not re-trigger at once.
    void garbage_collect() {
        const auto gc_threshold =
            static_cast<std::size_t>(options.conf.garbage_collection_threshold * static_cast<double>(allowed()));
        if (total_allocated_memory <= gc_threshold)
            return;
        const std::size_t target = total_allocated_memory - gc_threshold;
        std::size_t reclaimed = 0;
        std::uint64_t total_age = 0;
        std::int64_t freeable = 0;
        const auto age = [&](const Block* b) { return large.get_free_blocks_call_count - b->gc_count_base; };
        for (const Block* b : large.blocks) {
            if (!b->is_split() && b->es == nullptr) {
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
                if (!b->is_split() && b->es == nullptr && static_cast<double>(age(b)) >= age_threshold) {
                    freed = true;
                    reclaimed += b->size;
                    total_age -= age(b);
                    --freeable;
                    release_block(b);
                }
            }
        }
    }

    int out_of_memory(std::size_t size, std::size_t rounded, std::size_t alloc_size, int err) {
        OomInfo info;
        info.requested = size;
        info.rounded = rounded;
        info.allocation_size = alloc_size;
        backend.memory_info(&info.device_free, &info.device_total);
        info.allocated = st.allocated_bytes[stats::kAll].current;
        info.reserved = st.reserved_bytes[stats::kAll].current;
        for (const BlockPool* p : {&small, &large})
            for (const Block* b : p->blocks)
                info.largest_free_block = std::max(info.largest_free_block, b->size);
        info.allowed = set_fraction ? allowed() : 0;
        info.status = err;
        ++st.num_ooms;
        if (listener)
            listener->on_oom(info);
        return err;
    }

    // DeviceCachingAllocator::malloc.
    int malloc_caching(std::size_t size, std::uintptr_t stream, std::uintptr_t* out) {
        const std::size_t rounded = round_size(options.conf, size);
        BlockPool& pool = pool_for(rounded);
        const std::size_t alloc_size = allocation_size(rounded);
        ensure_spares();

        // PyTorch runs process_events before every lookup; its events are rare (record_stream)
        // while ours cover every free, so a fence is polled only when the cache has no fit:
        // a hit makes no device call. (With defer_frees off there are no fences at all and the
        // order is PyTorch's.)
        const bool wait_ran_out =
            pending.blocks.current > 0 && !pool.is_small && retire_before_split(pool, stream, rounded);
        count_lookup(pool);
        auto pos = find_free_block(pool, stream, rounded);
        Block* b = pos != pool.blocks.end() ? *pos : nullptr;
        if (b == nullptr && pending.blocks.current > 0 && !wait_ran_out)
            b = reclaim_pending(pool, stream, rounded); // our stand-in for the free-memory callbacks
        if (b == nullptr)
            ++counters.misses;
        int err = kOutOfMemory;
        if (b == nullptr) {
            if (gc_enabled)
                garbage_collect();
            b = alloc_block(pool, stream, alloc_size, false, &err, rounded);
            if (b == nullptr && err == kOutOfMemory && release_available_cached_blocks(pool, stream, rounded))
                b = alloc_block(pool, stream, alloc_size, false, &err, rounded);
            if (b == nullptr && err == kOutOfMemory) {
                release_cached_blocks();
                b = alloc_block(pool, stream, alloc_size, true, &err, rounded);
            }
        }
        if (b == nullptr) {
            // A code other than out-of-memory is a device error: PyTorch raises it from alloc_block
            // (C10_CUDA_CHECK) without the OOM path, and so do we.
            if (err != kOutOfMemory)
                return err;
            return out_of_memory(size, rounded, alloc_size, err);
        }
        if (pos != pool.blocks.end() && *pos != b)
            pos = pool.blocks.end(); // not the block found first (reclaimed or new): in no set now
        const bool split = should_split(b, rounded);
        b = alloc_found_block(b, rounded, size, split, pos);
        *out = b->ptr;
        note_reserved_peak();
        return kSuccess;
    }

    /// After a request: if reserved bytes have just exceeded every earlier value, remember the
    /// pool's state now (ReservedPeak). Reserved bytes only grow inside a request.
    void note_reserved_peak() {
        if (st.reserved_bytes[stats::kAll].current > reserved_peak.reserved)
            reserved_peak = moment();
    }

    /// The figures a ReservedPeak keeps, as they are now.
    ReservedPeak moment() const {
        return ReservedPeak{st.reserved_bytes[stats::kAll].current, st.allocated_bytes[stats::kAll].current,
                            st.inactive_split_bytes[stats::kAll].current};
    }

    // Passthrough (PYTORCH_NO_CUDA_MEMORY_CACHING-like). Decision: block size = segment size =
    // max(size, 1) rounded up to 512, so reserved == allocated == the 512-rounded sizes and
    // requested_bytes keeps the exact sizes; the device is asked for that rounded size.
    int malloc_passthrough(std::size_t size, std::uintptr_t stream, std::uintptr_t* out) {
        const std::size_t bsize = round_size(AllocConf{}, std::max<std::size_t>(size, 1));
        BlockPool& pool = pool_for(bsize);
        ensure_spares();
        int err = kOutOfMemory;
        Block* b = alloc_block(pool, stream, bsize, false, &err);
        if (b == nullptr) {
            if (err != kOutOfMemory)
                return err;
            return out_of_memory(size, bsize, bsize, err);
        }
        b = alloc_found_block(b, bsize, size, false, pool.blocks.end());
        *out = b->ptr;
        note_reserved_peak();
        return kSuccess;
    }

    int free_locked(std::uintptr_t ptr) {
        Block* b = ptr != 0 ? active.value_or(ptr, nullptr) : nullptr;
        if (b == nullptr || b->state != BState::allocated) {
            if (b != nullptr || segment_of(ptr) != nullptr) {
                ++invalid_frees; // double free (pending block) or an address inside a segment
                return kInvalidValue;
            }
            return kNotOwned;
        }
        BlockPool& pool = *b->pool;
        // PyTorch's free() of a block without record_stream: every program-facing figure drops
        // now. If the block must wait for a fence, that is the pool's business (pending).
        const auto bsize = static_cast<std::int64_t>(b->size);
        for_types(pool, [&](int t) {
            st.allocation[t].decrease(1);
            st.allocated_bytes[t].decrease(bsize);
            st.active[t].decrease(1);
            st.active_bytes[t].decrease(bsize);
            st.requested_bytes[t].decrease(static_cast<std::int64_t>(b->requested));
        });
        if (listener)
            listener->on_free_requested(b->ptr, b->size, b->requested);
        if (b->size >= max_split_size)
            st.oversize_allocations.decrease(1);
        if (options.mode == Mode::passthrough) {
            // PyTorch's order for an allocator without caching: the free completes, then the
            // segment goes back. A passthrough block is never split, so free_block merges nothing.
            release_block(free_block(b));
            return kSuccess;
        }
        if (options.defer_frees && !(options.reuse_when_ordered && backend.frees_ordered()))
            make_pending(b);
        else
            free_block(b);
        return kSuccess;
    }

    void make_pending(Block* b) {
        b->state = BState::pending;
        b->pending_next = nullptr;
        b->free_seq = ++free_seq;
        if (unfenced_tail)
            unfenced_tail->pending_next = b;
        else
            unfenced_head = b;
        unfenced_tail = b;
        unfenced_bytes += b->size;
        pending.bytes.increase(static_cast<std::int64_t>(b->size));
        pending.blocks.increase(1);
        ++counters.deferred_frees;
        // A fence recorded now is usually passed by the time a later malloc needs this memory,
        // whereas one recorded at that malloc is not yet. One in flight at least, and a new one
        // every fence_step() bytes so that a miss can wait for an old one: at most one device
        // call per free, usually none.
        if (unfenced_bytes >= fence_step())
            fence_unfenced();
    }

    std::size_t fence_step() const { return std::max(kMinFenceStep, total_allocated_memory / kFenceStepDivisor); }

    const Segment* segment_of(std::uintptr_t ptr) const {
        auto it = segments.upper_bound(ptr);
        if (it == segments.begin())
            return nullptr;
        --it;
        const Segment& s = it->second;
        return ptr - s.base < s.size ? &s : nullptr;
    }

    static BlockState public_state(BState s) {
        switch (s) {
        case BState::allocated: return BlockState::active_allocated;
        case BState::pending: return BlockState::active_pending_free;
        default: return BlockState::inactive;
        }
    }

    void forget_all() {
        small.blocks.clear();
        large.blocks.clear();
        small.unmapped.clear();
        large.unmapped.clear();
        active.clear();
        segments.clear();
        fenced.clear();
        unfenced_head = unfenced_tail = nullptr;
        unfenced_bytes = 0;
        pending.bytes.current = 0;
        pending.blocks.current = 0;
        spare_blocks.clear();
        for (auto& chunk : block_chunks)
            for (std::size_t i = 0; i < kBlockChunk; ++i)
                spare_blocks.push_back(&chunk[i]);
        total_allocated_memory = 0;
    }
};

DevicePool::DevicePool(Backend& backend, PoolOptions options, PoolListener* listener)
    : impl_(std::make_unique<Impl>(backend, std::move(options), listener)) {
}

DevicePool::~DevicePool() = default; // Impl holds no backend resources it would give back

int DevicePool::malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* ptr) {
    if (ptr == nullptr)
        return kInvalidValue;
    // NativeCachingAllocator::allocate refuses >= 1 EiB before the allocator sees it (no stats);
    // this also keeps every rounding below free of overflow. It is an out-of-memory all the same:
    // the listener hears of it (the report's OOM list, the trace).
    if (size >= kOneExaByte) {
        try {
            std::lock_guard<std::mutex> lock(impl_->mu);
            if (impl_->listener) {
                OomInfo info;
                info.requested = info.rounded = info.allocation_size = size;
                impl_->backend.memory_info(&info.device_free, &info.device_total);
                info.allocated = impl_->st.allocated_bytes[stats::kAll].current;
                info.reserved = impl_->st.reserved_bytes[stats::kAll].current;
                info.status = kOutOfMemory;
                impl_->listener->on_oom(info);
            }
        } catch (...) {
        }
        return kOutOfMemory;
    }
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        if (impl_->options.mode == Mode::passthrough)
            return impl_->malloc_passthrough(size, stream, ptr);
        return impl_->malloc_caching(size, stream, ptr);
    } catch (...) {
        std::lock_guard<std::mutex> lock(impl_->mu);
        ++impl_->counters.host_failures;
        return kOutOfMemory; // host memory exhausted for our own bookkeeping
    }
}

int DevicePool::free(std::uintptr_t ptr) {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->ensure_spares(); // before any state changes: a free may insert one set node
        return impl_->free_locked(ptr);
    } catch (...) {
        std::lock_guard<std::mutex> lock(impl_->mu);
        ++impl_->counters.host_failures;
        return kInvalidValue;
    }
}

Lookup DevicePool::lookup(std::uintptr_t ptr) const {
    Lookup r;
    std::lock_guard<std::mutex> lock(impl_->mu);
    const Segment* s = impl_->segment_of(ptr);
    if (s == nullptr)
        return r;
    r.in_pool = true;
    r.segment_base = s->base;
    r.segment_size = s->size;
    if (const Block* b = impl_->active.value_or(ptr, nullptr); b != nullptr && b->state == BState::allocated) {
        if (s->es != nullptr)
            std::tie(r.segment_base, r.segment_size) = Impl::mapped_run(b);
        r.is_block_start = true;
        r.block_address = b->ptr;
        r.block_size = b->size;
        return r;
    }
    for (const Block* b = s->head; b != nullptr; b = b->next) {
        if (ptr - b->ptr < b->size) {
            r.block_address = b->ptr;
            r.block_size = b->size;
            if (s->es != nullptr)
                std::tie(r.segment_base, r.segment_size) =
                    b->mapped ? Impl::mapped_run(b) : std::make_pair(b->ptr, b->size);
            break;
        }
    }
    return r;
}

void DevicePool::process_fences() {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->ensure_spares();
        // Public entry (unlike malloc's internal poll) also fences what was freed since the last
        // fence, so that a caller who knows the device is idle retires everything at once.
        impl_->fence_unfenced();
        impl_->process_fences_locked();
    } catch (...) {
    }
}

int DevicePool::retire(std::uintptr_t ptr) {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        Block* b = ptr != 0 ? impl_->active.value_or(ptr, nullptr) : nullptr;
        if (b == nullptr || b->state != BState::pending)
            return kInvalidValue;
        impl_->ensure_spares();
        if (!impl_->unlink_pending(b))
            return kInvalidValue;
        impl_->retire_block(b);
        return kSuccess;
    } catch (...) {
        return kInvalidValue;
    }
}

std::uint64_t DevicePool::pending_mark() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->free_seq;
}

void DevicePool::retire_through(std::uint64_t mark) {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->ensure_spares();
        impl_->retire_through_locked(mark);
    } catch (...) {
    }
}

void DevicePool::empty_cache() {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->ensure_spares();
        impl_->release_cached_blocks();
    } catch (...) {
    }
}

stats::DeviceStats DevicePool::stats() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->st;
}

void DevicePool::reset_peak_stats() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->st.reset_peak();
    impl_->pending.bytes.reset_peak();
    impl_->pending.blocks.reset_peak();
    impl_->reserved_peak = impl_->moment();
}

ReservedPeak DevicePool::reserved_peak() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->reserved_peak;
}

void DevicePool::reset_accumulated_stats() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->st.reset_accumulated();
    impl_->pending.bytes.reset_accumulated();
    impl_->pending.blocks.reset_accumulated();
}

PoolCounters DevicePool::counters() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->counters;
}

PendingStats DevicePool::pending() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->pending;
}

std::int64_t DevicePool::invalid_frees() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->invalid_frees;
}

std::size_t DevicePool::releasable_bytes() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    std::size_t total = 0;
    for (const BlockPool* p : {&impl_->small, &impl_->large})
        for (const Block* b : p->blocks)
            if (b->es != nullptr)
                total += b->es->whole_pages_bytes(b->ptr, b->size);
            else if (!b->is_split())
                total += b->size;
    return total;
}

std::vector<SegmentInfo> DevicePool::snapshot() const {
    std::vector<SegmentInfo> out;
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        out.reserve(impl_->segments.size());
        for (const auto& [base, s] : impl_->segments) {
            if (s.es != nullptr) {
                impl_->snapshot_expandable(s, out);
                continue;
            }
            SegmentInfo si;
            si.address = s.base;
            si.total_size = s.size;
            si.stream = s.stream;
            si.is_small = s.pool->is_small;
            for (const Block* b = s.head; b != nullptr; b = b->next) {
                BlockInfo bi{b->ptr, b->size, b->requested, Impl::public_state(b->state)};
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
    } catch (...) {
    }
    return out;
}

void DevicePool::drop_all() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    // The context vanished with the memory (cudaDeviceReset, cuCtxDestroy): every block the
    // program still held and every segment are gone. The listener hears of each, as if freed, so
    // that call-site accounting and the trace no longer count them live; the statistics count
    // them as freed/released so that allocated - freed = current holds for every key.
    if (impl_->listener) {
        for (const auto& [base, seg] : impl_->segments) {
            for (const Block* b = seg.head; b != nullptr; b = b->next) {
                if (b->state == BState::allocated)
                    impl_->listener->on_free_requested(b->ptr, b->size, b->requested);
                if (b->state != BState::free)
                    impl_->listener->on_free_completed(b->ptr, b->size, b->requested);
            }
            impl_->listener->on_segment_free(seg.base, seg.size);
        }
    }
    impl_->forget_all();
    auto& st = impl_->st;
    auto drop = [](stats::Stat& s) {
        if (s.current > 0)
            s.freed += s.current;
        s.current = 0;
    };
#define X(name)                                                                                                        \
    for (auto& s : st.name)                                                                                            \
        drop(s);
    GPUMEMPROF_STAT_ARRAYS(X)
#undef X
#define X(name) drop(st.name);
    GPUMEMPROF_STAT_SINGLES(X)
#undef X
}

void DevicePool::with_lock(const std::function<void()>& fn) const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    fn();
}

void DevicePool::lock_for_fork() {
    impl_->mu.lock();
}

void DevicePool::unlock_after_fork() {
    impl_->mu.unlock();
}

} // namespace gpumemprof::pool
