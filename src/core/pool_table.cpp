// SPDX-License-Identifier: MIT
#include "core/pool_table.hpp"

#include "core/pool_events.hpp"

namespace gpumemprof::core {

PoolSlot::~PoolSlot() = default;

int PoolTable::free_live_index() const {
    for (int i = 0; i < kMaxLive; ++i) {
        PoolSlot* p = live_[i].load(std::memory_order_acquire);
        if (!p || !p->ctx.load(std::memory_order_acquire))
            return i;
    }
    return -1;
}

PoolSlot* PoolTable::publish(std::unique_ptr<PoolSlot> slot, CUcontext ctx, int live_index) {
    slot->ctx.store(ctx, std::memory_order_release);
    PoolSlot* raw = slot.get();
    all_.push_back(std::move(slot));
    live_[live_index].store(raw, std::memory_order_release);
    if (live_index >= live_count_.load(std::memory_order_relaxed))
        live_count_.store(live_index + 1, std::memory_order_release);
    return raw;
}

void PoolTable::drop(CUcontext ctx) {
    std::lock_guard lock(mutex_);
    for (auto& s : live_) {
        PoolSlot* p = s.load(std::memory_order_acquire);
        if (p && p->ctx.load(std::memory_order_acquire) == ctx) {
            p->pool->drop_all();
            if (p->model)
                p->model->drop_all();
            p->backend->forget();
            p->ctx.store(nullptr, std::memory_order_release);
            s.store(nullptr, std::memory_order_release);
        }
    }
}

std::vector<CUcontext> PoolTable::primary_contexts(int device) const {
    std::vector<CUcontext> out;
    std::lock_guard lock(mutex_);
    for (const auto& s : live_) {
        PoolSlot* p = s.load(std::memory_order_acquire);
        if (p && p->primary && p->device == device)
            out.push_back(p->ctx.load(std::memory_order_acquire));
    }
    return out;
}

std::vector<PoolSlot*> PoolTable::slots_of(int device) const {
    std::vector<PoolSlot*> out;
    std::lock_guard lock(mutex_);
    for (const auto& s : all_)
        if (s->device == device)
            out.push_back(s.get());
    return out;
}

bool PoolTable::carries_ledger(const PoolSlot* slot) const {
    for (auto it = all_.rbegin(); it != all_.rend(); ++it)
        if ((*it)->device == slot->device)
            return it->get() == slot;
    return false;
}

void PoolTable::lock_for_fork() {
    mutex_.lock();
    for (auto& s : all_) {
        s->pool->lock_for_fork();
        s->torch_locked_for_fork = s->torch_ready.load(std::memory_order_acquire);
        if (s->torch_locked_for_fork)
            s->torch->lock_for_fork();
    }
}

void PoolTable::unlock_after_fork() {
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) {
        if ((*it)->torch_locked_for_fork)
            (*it)->torch->unlock_after_fork();
        (*it)->pool->unlock_after_fork();
    }
    mutex_.unlock();
}

void PoolTable::abandon_after_fork() {
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) {
        if ((*it)->torch_locked_for_fork)
            (*it)->torch->unlock_after_fork();
        (*it)->pool->unlock_after_fork();
    }
    // The child cannot use the parent's CUDA state: start from nothing, without any CUDA call.
    for (auto& s : live_)
        s.store(nullptr, std::memory_order_relaxed);
    // Released, not destroyed, and nothing freed (not even the fence lists): a fork child of a
    // multi-threaded program must not touch the heap before it has to (Profiler::fork_child).
    for (auto& s : all_)
        (void)s.release();
    all_.clear(); // null pointers only; the capacity stays
    mutex_.unlock();
}

} // namespace gpumemprof::core
