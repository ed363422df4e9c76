// SPDX-License-Identifier: MIT
// Deferred frees and fences (see pending_frees.hpp).
#include "pool/pending_frees.hpp"

#include "pool/caching_policy.hpp"

#include <algorithm>
#include <chrono>

namespace gpumemprof::pool::detail {
namespace {

/// Fence cadence: a free records a new fence once this many bytes were freed since the last
/// one (or reserved/kFenceStepDivisor, whichever is larger), so that a miss finds an old enough
/// fence to wait for instead of one recorded at the miss (which waits for the whole queue).
constexpr std::size_t kMinFenceStep = std::size_t{2} << 20;
constexpr std::size_t kFenceStepDivisor = 8;
/// Upper bound of one wait on a miss; past it the pool grows instead (the device may be waiting
/// for something this process does after the allocation returns).
constexpr std::uint64_t kWaitLimitNs = 200'000'000;

std::int64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count();
}

} // namespace

void PendingFrees::make_pending(Block* b) {
    b->state = BState::pending;
    b->pending_next = nullptr;
    b->free_seq = ++free_seq_;
    if (unfenced_tail_)
        unfenced_tail_->pending_next = b;
    else
        unfenced_head_ = b;
    unfenced_tail_ = b;
    unfenced_bytes_ += b->size;
    s_.pending.bytes.increase(static_cast<std::int64_t>(b->size));
    s_.pending.blocks.increase(1);
    ++s_.counters.deferred_frees;
    // A fence recorded now is usually passed by the time a later malloc needs this memory,
    // whereas one recorded at that malloc is not yet. One in flight at least, and a new one
    // every fence_step() bytes so that a miss can wait for an old one: at most one device
    // call per free, usually none.
    if (unfenced_bytes_ >= fence_step())
        fence_unfenced();
}

std::size_t PendingFrees::fence_step() const {
    return std::max(kMinFenceStep, s_.total_allocated_memory / kFenceStepDivisor);
}

void PendingFrees::retire_group(Block* head) {
    while (head != nullptr) {
        Block* next = head->pending_next;
        retire_block(head);
        head = next;
    }
}

/// A pending block becomes reusable (its list links are the caller's business).
void PendingFrees::retire_block(Block* b) {
    b->pending_next = nullptr;
    s_.pending.bytes.decrease(static_cast<std::int64_t>(b->size));
    s_.pending.blocks.decrease(1);
    policy_.free_block(b);
}

void PendingFrees::fence_unfenced() {
    if (unfenced_head_ == nullptr)
        return;
    const auto t0 = std::chrono::steady_clock::now();
    const FenceId id = s_.backend.fence_record();
    s_.counters.fence_ns += elapsed_ns(t0);
    if (id == 0)
        return;
    ++s_.counters.fences_recorded;
    try {
        fenced_.push_back(FenceGroup{id, unfenced_head_});
    } catch (...) {
        s_.backend.fence_release(id);
        return;
    }
    unfenced_head_ = unfenced_tail_ = nullptr;
    unfenced_bytes_ = 0;
}

/// The fenced groups up to and including `index` are done: retire them, oldest first.
void PendingFrees::retire_front(std::size_t index) {
    for (std::size_t i = 0; i <= index; ++i) {
        const FenceGroup g = fenced_.front();
        fenced_.pop_front();
        retire_group(g.head);
        s_.backend.fence_release(g.id);
    }
}

bool PendingFrees::group_may_serve(std::size_t index, const BlockPool& pool, std::uintptr_t stream,
                                   std::size_t rounded) const {
    for (const Block* b = fenced_[index].head; b != nullptr; b = b->pending_next)
        if (b->pool == &pool && b->stream == stream && b->seg->size >= rounded)
            return true;
    return false;
}

bool PendingFrees::wait_and_retire(std::size_t index) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool done = s_.backend.fence_wait_for(fenced_[index].id, kWaitLimitNs);
    ++s_.counters.fence_waits;
    s_.counters.wait_ns += elapsed_ns(t0);
    if (!done) {
        ++s_.counters.wait_timeouts;
        return false;
    }
    retire_front(index);
    return true;
}

/// Take `b` out of whichever pending list holds it (fenced group or unfenced).
bool PendingFrees::unlink(Block* b) {
    for (std::size_t i = 0; i < fenced_.size(); ++i) {
        Block** link = &fenced_[i].head;
        while (*link != nullptr && *link != b)
            link = &(*link)->pending_next;
        if (*link == b) {
            *link = b->pending_next;
            if (fenced_[i].head == nullptr) { // nothing left behind this fence
                s_.backend.fence_release(fenced_[i].id);
                fenced_.erase(fenced_.begin() + static_cast<std::ptrdiff_t>(i));
            }
            return true;
        }
    }
    Block* prev = nullptr;
    for (Block* c = unfenced_head_; c != nullptr; prev = c, c = c->pending_next) {
        if (c != b)
            continue;
        (prev ? prev->pending_next : unfenced_head_) = c->pending_next;
        if (unfenced_tail_ == c)
            unfenced_tail_ = prev;
        unfenced_bytes_ -= c->size;
        return true;
    }
    return false;
}

bool PendingFrees::retire_now(Block* b) {
    if (!unlink(b))
        return false;
    retire_block(b);
    return true;
}

void PendingFrees::retire_through(std::uint64_t mark) {
    while (!fenced_.empty()) {
        FenceGroup& g = fenced_.front();
        while (g.head != nullptr && g.head->free_seq <= mark) {
            Block* b = g.head;
            g.head = b->pending_next;
            retire_block(b);
        }
        if (g.head != nullptr)
            return; // later frees wait for this fence
        s_.backend.fence_release(g.id);
        fenced_.pop_front();
    }
    while (unfenced_head_ != nullptr && unfenced_head_->free_seq <= mark) {
        Block* b = unfenced_head_;
        unfenced_head_ = b->pending_next;
        unfenced_bytes_ -= b->size;
        retire_block(b);
    }
    if (unfenced_head_ == nullptr)
        unfenced_tail_ = nullptr;
}

bool PendingFrees::process() {
    bool any = false;
    while (!fenced_.empty()) {
        ++s_.counters.fence_polls;
        const auto t0 = std::chrono::steady_clock::now();
        const bool done = s_.backend.fence_done(fenced_.front().id);
        s_.counters.poll_ns += elapsed_ns(t0);
        if (!done)
            break;
        retire_front(0);
        any = true;
    }
    return any;
}

void PendingFrees::synchronize_all() {
    ++s_.st.num_sync_all_streams;
    fence_unfenced();
    while (!fenced_.empty()) {
        if (!s_.backend.fence_wait(fenced_.front().id))
            break; // waiting is not allowed now: the rest stays pending
        retire_front(0);
    }
    if (unfenced_head_ != nullptr && fenced_.empty() && s_.backend.synchronize()) {
        // No fence could be recorded (the driver refused an event): a synchronisation of the
        // whole context shows the device past every free so far. Without it these blocks would
        // stay pending for good and the program would run out of memory it has freed.
        retire_group(unfenced_head_);
        unfenced_head_ = unfenced_tail_ = nullptr;
    }
}

void PendingFrees::forget_all() {
    fenced_.clear();
    unfenced_head_ = unfenced_tail_ = nullptr;
    unfenced_bytes_ = 0;
    s_.pending.bytes.current = 0;
    s_.pending.blocks.current = 0;
}

} // namespace gpumemprof::pool::detail
