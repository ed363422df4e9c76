// SPDX-License-Identifier: MIT
// Deferred frees and fences (our stand-in for PyTorch's record_stream events): a block the
// program freed that device work queued before the free may still touch waits, pending, behind a
// fence until the device has passed it. Unfenced pending blocks form one list; fenced ones form
// groups, one per fence, oldest first. Fences finish in order, so the groups retire from the
// front. Retiring a block hands it to the policy's free_block.
#pragma once

#include "pool/pool_state.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>

namespace gpumemprof::pool::detail {

class CachingPolicy;

class PendingFrees {
public:
    PendingFrees(PoolState& s, CachingPolicy& policy) : s_(s), policy_(policy) {}

    bool empty() const { return s_.pending.blocks.current == 0; }
    bool any_fenced() const { return !fenced_.empty(); }
    bool any_unfenced() const { return unfenced_head_ != nullptr; }
    std::size_t fenced_groups() const { return fenced_.size(); }
    /// Frees so far that left a block pending (pending_mark()).
    std::uint64_t free_seq() const { return free_seq_; }

    /// The freed block `b` waits; a fence is recorded when enough bytes were freed since the last.
    void make_pending(Block* b);
    /// One fence for every unfenced pending block. fence_record() == 0: they stay unfenced.
    void fence_unfenced();
    /// process_events: retire the groups whose fences are done, oldest first, up to the first
    /// that is not. Returns whether any block was retired.
    bool process();
    /// Wait (bounded) for fenced group `index`; when it is done, retire it and every older one.
    /// False when the wait ran out of time.
    bool wait_and_retire(std::size_t index);
    /// Could a block of group `index`, once free, be (part of) a block that serves `rounded`
    /// bytes on `stream` from `pool`? Same pool, same stream, a segment large enough.
    bool group_may_serve(std::size_t index, const BlockPool& pool, std::uintptr_t stream, std::size_t rounded) const;
    /// Index of the oldest fenced group holding a block for which `serves(block)` holds, else
    /// fenced_groups(); `*unfenced` tells whether an unfenced block does.
    template <typename Pred> std::size_t find_group(Pred&& serves, bool* unfenced) const {
        *unfenced = false;
        for (const Block* c = unfenced_head_; c != nullptr && !*unfenced; c = c->pending_next)
            *unfenced = serves(c);
        for (std::size_t i = 0; i < fenced_.size(); ++i)
            for (const Block* c = fenced_[i].head; c != nullptr; c = c->pending_next)
                if (serves(c))
                    return i;
        return fenced_.size();
    }
    /// The pending block `b` becomes reusable now (a replayed free_completed). False if `b` is in
    /// no pending list.
    bool retire_now(Block* b);
    /// Retire every pending block freed at or before free number `mark` (the device is past it).
    void retire_through(std::uint64_t mark);
    /// synchronize_and_free_events: wait for every outstanding fence (fencing the unfenced first).
    void synchronize_all();
    /// The context is gone: forget every pending block (their records go with the store's).
    void forget_all();

private:
    struct FenceGroup {
        FenceId id = 0;
        Block* head = nullptr;
    };

    void retire_group(Block* head);
    void retire_block(Block* b);
    void retire_front(std::size_t index);
    bool unlink(Block* b);
    std::size_t fence_step() const;

    PoolState& s_;
    CachingPolicy& policy_;
    Block* unfenced_head_ = nullptr;
    Block* unfenced_tail_ = nullptr;
    std::size_t unfenced_bytes_ = 0;
    std::deque<FenceGroup> fenced_; ///< oldest first
    std::uint64_t free_seq_ = 0;    ///< frees so far that left a block pending
};

} // namespace gpumemprof::pool::detail
