// SPDX-License-Identifier: MIT
// DevicePool: the public face of one pool (see device_pool.hpp). It holds the parts, takes the
// lock, turns host out-of-memory into error codes and routes each call: the policy
// (caching_policy), the block store (block_store), device memory (plain_segments or
// expandable_blocks), deferred frees (pending_frees) and the pool without caching
// (passthrough_pool).
#include "pool/device_pool.hpp"

#include "pool/caching_policy.hpp"
#include "pool/expandable_blocks.hpp"
#include "pool/passthrough_pool.hpp"
#include "pool/pending_frees.hpp"
#include "pool/plain_segments.hpp"
#include "pool/pool_state.hpp"
#include "util/swallowed.hpp"

#include <mutex>
#include <tuple>
#include <utility>

namespace gpumemprof::pool {

using namespace detail;

namespace {

constexpr std::size_t kOneExaByte = std::size_t{1} << 60;

} // namespace

struct DevicePool::Impl {
    Impl(Backend& b, PoolOptions o, PoolListener* l)
        : state(b, std::move(o), l), plain(state), expandable(state), pending(state, policy),
          policy(state, supply(), pending), passthrough(state, policy, plain) {}

    /// Where device memory comes from: pages of expandable segments, or whole segments.
    SegmentSupply& supply() { return state.expandable ? static_cast<SegmentSupply&>(expandable) : plain; }
    const SegmentSupply& supply() const {
        return state.expandable ? static_cast<const SegmentSupply&>(expandable) : plain;
    }

    mutable std::mutex mu;
    PoolState state;
    PlainSegments plain;
    ExpandableBlocks expandable;
    PendingFrees pending;
    CachingPolicy policy;
    PassthroughPool passthrough;
};

DevicePool::DevicePool(Backend& backend, PoolOptions options, PoolListener* listener)
    : impl_(std::make_unique<Impl>(backend, std::move(options), listener)) {
}

DevicePool::~DevicePool() = default; // Impl holds no backend resources it would give back

int DevicePool::malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* ptr, RequestSite site) {
    if (ptr == nullptr)
        return kInvalidValue;
    PoolState& s = impl_->state;
    // NativeCachingAllocator::allocate refuses >= 1 EiB before the allocator sees it (no stats);
    // this also keeps every rounding below free of overflow. It is an out-of-memory all the same:
    // the listener hears of it (the report's OOM list, the trace).
    if (size >= kOneExaByte) {
        try {
            std::lock_guard<std::mutex> lock(impl_->mu);
            if (s.listener)
                s.listener->on_oom(oom_record(s, size, size, size, kOutOfMemory), site);
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
        return kOutOfMemory;
    }
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        if (s.options.mode == Mode::passthrough)
            return impl_->passthrough.malloc(size, stream, ptr, site);
        return impl_->policy.malloc(size, stream, ptr, nullptr, site);
    } catch (...) {
        std::lock_guard<std::mutex> lock(impl_->mu);
        ++s.counters.host_failures;
        return kOutOfMemory; // host memory exhausted for our own bookkeeping
    }
}

int DevicePool::malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* ptr, PoolId pool_id, RequestSite site) {
    PoolState& s = impl_->state;
    if (pool_id == kDefaultPoolId || s.options.mode == Mode::passthrough || ptr == nullptr || size >= kOneExaByte)
        return malloc(size, stream, ptr, site);
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        return impl_->policy.malloc(size, stream, ptr, &s.store.private_pool(pool_id), site);
    } catch (...) {
        std::lock_guard<std::mutex> lock(impl_->mu);
        ++s.counters.host_failures;
        return kOutOfMemory; // host memory exhausted for our own bookkeeping
    }
}

int DevicePool::free(std::uintptr_t ptr) {
    PoolState& s = impl_->state;
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        s.ensure_spares(); // before any state changes: a free may insert one set node
        if (s.options.mode == Mode::passthrough)
            return impl_->passthrough.free(ptr);
        return impl_->policy.free(ptr);
    } catch (...) {
        std::lock_guard<std::mutex> lock(impl_->mu);
        ++s.counters.host_failures;
        return kInvalidValue;
    }
}

Lookup DevicePool::lookup(std::uintptr_t ptr) const {
    Lookup r;
    std::lock_guard<std::mutex> lock(impl_->mu);
    const BlockStore& store = impl_->state.store;
    const Segment* s = store.segment_of(ptr);
    if (s == nullptr)
        return r;
    r.in_pool = true;
    r.segment_base = s->base;
    r.segment_size = s->size;
    if (const Block* b = store.active.value_or(ptr, nullptr); b != nullptr && b->state == BState::allocated) {
        std::tie(r.segment_base, r.segment_size) = impl_->supply().range_of(*s, b);
        r.is_block_start = true;
        r.block_address = b->ptr;
        r.block_size = b->size;
        r.block_allocated = true;
        r.block_requested = b->requested;
        return r;
    }
    for (const Block* b = s->head; b != nullptr; b = b->next) {
        if (ptr - b->ptr < b->size) {
            r.block_address = b->ptr;
            r.block_size = b->size;
            r.block_allocated = b->state == BState::allocated;
            r.block_requested = b->requested;
            std::tie(r.segment_base, r.segment_size) = impl_->supply().range_of(*s, b);
            break;
        }
    }
    return r;
}

void DevicePool::process_fences() {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->state.ensure_spares();
        // Public entry (unlike malloc's internal poll) also fences what was freed since the last
        // fence, so that a caller who knows the device is idle retires everything at once.
        impl_->pending.fence_unfenced();
        impl_->pending.process();
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

int DevicePool::retire(std::uintptr_t ptr) {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        Block* b = ptr != 0 ? impl_->state.store.active.value_or(ptr, nullptr) : nullptr;
        if (b == nullptr || b->state != BState::pending)
            return kInvalidValue;
        impl_->state.ensure_spares();
        return impl_->pending.retire_now(b) ? kSuccess : kInvalidValue;
    } catch (...) {
        return kInvalidValue;
    }
}

std::uint64_t DevicePool::pending_mark() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->pending.free_seq();
}

void DevicePool::retire_through(std::uint64_t mark) {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->state.ensure_spares();
        impl_->pending.retire_through(mark);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void DevicePool::empty_cache() {
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->state.ensure_spares();
        impl_->policy.release_cached_blocks();
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

stats::DeviceStats DevicePool::stats() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->state.st;
}

void DevicePool::reset_peak_stats() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    PoolState& s = impl_->state;
    s.st.reset_peak();
    s.pending.bytes.reset_peak();
    s.pending.blocks.reset_peak();
    s.reserved_peak = s.moment();
}

ReservedPeak DevicePool::reserved_peak() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->state.reserved_peak;
}

void DevicePool::reset_accumulated_stats() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    PoolState& s = impl_->state;
    s.st.reset_accumulated();
    s.pending.bytes.reset_accumulated();
    s.pending.blocks.reset_accumulated();
}

PoolCounters DevicePool::counters() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->state.counters;
}

PendingStats DevicePool::pending() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->state.pending;
}

std::int64_t DevicePool::invalid_frees() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->state.invalid_frees;
}

std::size_t DevicePool::releasable_bytes() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    const BlockStore& store = impl_->state.store;
    std::size_t total = 0;
    for (const BlockPool* p : {&store.small, &store.large})
        for (const Block* b : p->blocks)
            total += impl_->supply().releasable(b);
    return total;
}

std::vector<SegmentInfo> DevicePool::snapshot() const {
    std::vector<SegmentInfo> out;
    try {
        std::lock_guard<std::mutex> lock(impl_->mu);
        const BlockStore& store = impl_->state.store;
        out.reserve(store.segments.size());
        for (const auto& [base, s] : store.segments) {
            BlockStore::check_segment(s);
            impl_->supply().snapshot(s, out);
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return out;
}

void DevicePool::drop_all() {
    std::lock_guard<std::mutex> lock(impl_->mu);
    PoolState& s = impl_->state;
    // The context vanished with the memory (cudaDeviceReset, cuCtxDestroy): every block the
    // program still held and every segment are gone. The listener hears of each, as if freed, so
    // that call-site accounting and the trace no longer count them live; the statistics count
    // them as freed/released so that allocated - freed = current holds for every key.
    if (s.listener) {
        for (const auto& [base, seg] : s.store.segments) {
            for (const Block* b = seg.head; b != nullptr; b = b->next) {
                if (b->state == BState::allocated)
                    s.listener->on_free_requested(b->ptr, b->size, b->requested);
                if (b->state != BState::free)
                    s.listener->on_free_completed(b->ptr, b->size, b->requested);
            }
            s.listener->on_segment_free(seg.base, seg.size);
        }
    }
    s.store.forget_all();
    impl_->pending.forget_all();
    s.total_allocated_memory = 0;
    s.st.for_each_stat([](stats::Stat& stat) {
        if (stat.current > 0)
            stat.freed += stat.current;
        stat.current = 0;
    });
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
