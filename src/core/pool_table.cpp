// SPDX-License-Identifier: MIT
#include "core/pool_table.hpp"

#include "core/pool_events.hpp"

#include <new>

namespace gpumemprof::core {

PoolSlot::~PoolSlot() = default;

std::atomic<PoolSlot*>* PoolTable::live_entry(int i) const {
    LiveChunk* c = &first_;
    for (; i >= kChunk && c; i -= kChunk)
        c = c->next.load(std::memory_order_relaxed);
    return c ? &c->slots[i] : nullptr;
}

std::atomic<PoolSlot*>* PoolTable::free_live_entry() {
    const int n = live_count_.load(std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
        std::atomic<PoolSlot*>* e = live_entry(i);
        PoolSlot* p = e->load(std::memory_order_relaxed);
        if (!p || !p->ctx.load(std::memory_order_relaxed))
            return e;
    }
    if (std::atomic<PoolSlot*>* e = live_entry(n))
        return e;
    // Every chunk is full: link a new one (published before live_count_ grows into it).
    LiveChunk* last = &first_;
    while (LiveChunk* next = last->next.load(std::memory_order_relaxed))
        last = next;
    auto* chunk = new (std::nothrow) LiveChunk();
    if (!chunk)
        return nullptr;
    last->next.store(chunk, std::memory_order_release);
    return live_entry(n);
}

PoolSlot* PoolTable::publish(std::unique_ptr<PoolSlot> slot, CUcontext ctx, std::atomic<PoolSlot*>* entry) {
    slot->ctx.store(ctx, std::memory_order_release);
    PoolSlot* raw = slot.get();
    all_.push_back(std::move(slot));
    entry->store(raw, std::memory_order_release);
    const int n = live_count_.load(std::memory_order_relaxed);
    if (entry == live_entry(n))
        live_count_.store(n + 1, std::memory_order_release);
    return raw;
}

void PoolTable::drop(CUcontext ctx, const Retire& retire) {
    std::lock_guard lock(mutex_);
    for_each_entry([&](std::atomic<PoolSlot*>& e) {
        PoolSlot* p = e.load(std::memory_order_acquire);
        if (p && p->ctx.load(std::memory_order_acquire) == ctx) {
            p->pool->drop_all();
            if (p->model)
                p->model->drop_all();
            p->backend->forget();
            p->ctx.store(nullptr, std::memory_order_release);
            e.store(nullptr, std::memory_order_release);
            try {
                dead_.push_back(p);
            } catch (...) {
                // Out of host memory: this pool stays in the table for good.
            }
        }
    });
    retire_old(retire);
}

void PoolTable::retire_old(const Retire& retire) {
    std::size_t kept = 0;
    for (std::size_t i = dead_.size(); i-- > 0;) {
        PoolSlot* p = dead_[i];
        const bool pinned = p->torch_ready.load(std::memory_order_acquire) || carries_ledger(p);
        if (++kept <= kKeptDead || pinned)
            continue;
        if (retire)
            retire(*p);
        dead_.erase(dead_.begin() + static_cast<std::ptrdiff_t>(i));
        for (auto it = all_.begin(); it != all_.end(); ++it)
            if (it->get() == p) {
                all_.erase(it); // deletes the pool, its model, history and backend (no CUDA call)
                break;
            }
    }
}

std::vector<CUcontext> PoolTable::primary_contexts(int device) const {
    std::vector<CUcontext> out;
    std::lock_guard lock(mutex_);
    for_each_entry([&](const std::atomic<PoolSlot*>& e) {
        PoolSlot* p = e.load(std::memory_order_acquire);
        if (p && p->primary && p->device == device)
            out.push_back(p->ctx.load(std::memory_order_acquire));
    });
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
    for_each_entry([](std::atomic<PoolSlot*>& e) { e.store(nullptr, std::memory_order_relaxed); });
    // Released, not destroyed, and nothing freed (not even the fence lists): a fork child of a
    // multi-threaded program must not touch the heap before it has to (Profiler::fork_child).
    for (auto& s : all_)
        (void)s.release();
    all_.clear(); // null pointers only; the capacity stays
    dead_.clear();
    next_index_ = 0; // the child's contexts are numbered from its own first
    mutex_.unlock();
}

PoolSlot* PoolTable::find_live_beyond(CUcontext ctx, int n) const {
    const LiveChunk* c = first_.next.load(std::memory_order_acquire);
    for (int base = kChunk; base < n && c; base += kChunk, c = c->next.load(std::memory_order_acquire)) {
        const int m = n - base < kChunk ? n - base : kChunk;
        for (int i = 0; i < m; ++i) {
            PoolSlot* s = c->slots[i].load(std::memory_order_acquire);
            if (s && s->ctx.load(std::memory_order_acquire) == ctx)
                return s;
        }
    }
    return nullptr;
}

} // namespace gpumemprof::core
