// SPDX-License-Identifier: MIT
// The pools, one per CUDA context: the live ones, which the hot path reads without a lock, as
// many as the program keeps live at once, and the latest dead ones (destroyed contexts), kept for
// the report; older dead ones are folded into one entry per device and deleted.
#pragma once

#include "core/driver_backend.hpp"
#include "core/memory_categories.hpp"
#include "pool/device_pool.hpp"
#include "pool/pool_model.hpp"
#include "pool/torch_mirror.hpp"

#include "core/cuda_api.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace gpumemprof::core {

class PoolEvents;

/// One CUDA context's pool. A destroyed context's slot is marked dead (its statistics stay for the
/// report); it is deleted only once kKeptDead contexts have died after it (PoolTable::drop).
struct PoolSlot {
    std::atomic<CUcontext> ctx{nullptr}; ///< null once the context is gone
    int device = 0;
    bool primary = true;
    int index = 0; ///< position in the table: the JSON's "context"
    std::unique_ptr<DriverBackend> backend;
    std::unique_ptr<pool::PoolModel> model; ///< null with GPUMEMPROF_MODEL=0
    std::unique_ptr<PoolEvents> events;
    std::unique_ptr<pool::DevicePool> pool;
    std::atomic<std::int64_t> ipc_refused{0};
    /// A kernel of the context faulted (device-side assert, illegal address...): the driver
    /// answers this error to every later call that uses the context, so the pool's frees and
    /// allocations do too (Profiler::note_error). 0 while the context is sound.
    std::atomic<int> sticky_error{0};
    std::size_t total_bytes = 0; ///< device capacity, read when the pool was made (no CUDA at exit)
    /// PyTorch's own caching allocator on this context, attached (GPUMEMPROF_TORCH=attach): its
    /// state rebuilt from its events, and what the core does with them. Set once, under
    /// Profiler's torch mutex, then read without a lock (published by torch_ready).
    std::unique_ptr<pool::TorchMirror> torch;
    std::unique_ptr<PoolEvents> torch_events;
    pool::AllocConf torch_conf;
    std::unique_ptr<MemoryCategories> categories; ///< what kind of memory each block is
    std::atomic<bool> torch_ready{false};
    bool torch_locked_for_fork = false; ///< the mirror's lock is held across fork
    /// PyTorch's own statistics, read once at exit before its allocator is destroyed, and the
    /// mirror's at that moment (the reports compare them).
    bool torch_checked = false;
    stats::DeviceStats torch_reported, torch_mirrored;

    ~PoolSlot();
};

class PoolTable {
public:
    /// The live pools are listed in chunks of this many entries: the first is part of the table
    /// (the hot path's lookup reads it without a pointer hop), later ones are allocated as more
    /// contexts are live at once, and never freed.
    static constexpr int kChunk = 64;
    /// Destroyed contexts whose pools are kept whole for the report (the latest ones); each older
    /// one is handed to drop()'s `retire` and deleted. Never deleted: the newest pool of a device
    /// (it carries the device's pass-through figures) and a pool with PyTorch's mirror attached
    /// (read without the table lock).
    static constexpr std::size_t kKeptDead = 16;
    /// Receives a dead slot just before it is deleted, under the table lock.
    using Retire = std::function<void(const PoolSlot&)>;

    /// Call fn(slot) for each live pool until it returns true. No allocation, no lock.
    template <typename Fn> void for_each_live(Fn&& fn) const {
        const int n = live_count_.load(std::memory_order_acquire);
        const int first = n < kChunk ? n : kChunk;
        for (int i = 0; i < first; ++i) {
            PoolSlot* s = first_.slots[i].load(std::memory_order_acquire);
            if (s && s->ctx.load(std::memory_order_acquire) && fn(s))
                return;
        }
        if (n > kChunk) [[unlikely]] {
            const LiveChunk* c = first_.next.load(std::memory_order_acquire);
            for (int base = kChunk; base < n && c; base += kChunk, c = c->next.load(std::memory_order_acquire)) {
                const int m = n - base < kChunk ? n - base : kChunk;
                for (int i = 0; i < m; ++i) {
                    PoolSlot* s = c->slots[i].load(std::memory_order_acquire);
                    if (s && s->ctx.load(std::memory_order_acquire) && fn(s))
                        return;
                }
            }
        }
    }
    /// The live pool of `ctx`, or null. No lock (the hot path's lookup: the first chunk is read
    /// here, inline; the later ones by find_live_beyond).
    PoolSlot* find_live(CUcontext ctx) const {
        if (!ctx)
            return nullptr;
        const int n = live_count_.load(std::memory_order_acquire);
        const int first = n < kChunk ? n : kChunk;
        for (int i = 0; i < first; ++i) {
            PoolSlot* s = first_.slots[i].load(std::memory_order_acquire);
            if (s && s->ctx.load(std::memory_order_acquire) == ctx)
                return s;
        }
        if (n > kChunk) [[unlikely]]
            return find_live_beyond(ctx, n);
        return nullptr;
    }

    /// The live pool of `ctx`; if there is none, make(index) builds one (with `ctx` not yet
    /// set), which is then published. `index` numbers the table's pools in the order they were
    /// made (the JSON's "context"). Null when make returns null or host memory runs out.
    /// Takes the table lock (make runs under it).
    template <typename Make> PoolSlot* find_or_add(CUcontext ctx, Make&& make) {
        std::lock_guard lock(mutex_);
        if (PoolSlot* p = find_live(ctx)) // another thread may have won the race
            return p;
        std::atomic<PoolSlot*>* entry = free_live_entry();
        if (!entry)
            return nullptr;
        std::unique_ptr<PoolSlot> slot = make(next_index_);
        if (!slot)
            return nullptr;
        ++next_index_;
        return publish(std::move(slot), ctx, entry);
    }

    /// Mark ctx's pool dead: its blocks and fences are forgotten without driver calls. Dead pools
    /// beyond the latest kKeptDead are handed to `retire`, then deleted: a thread may still hold
    /// a slot it found live only while kKeptDead more contexts die (CUDA forbids using a context
    /// while it is destroyed, so a program that keeps to that rule never does).
    void drop(CUcontext ctx, const Retire& retire);
    /// The live primary contexts of `device`.
    std::vector<CUcontext> primary_contexts(int device) const;

    /// Call fn(slot) for every pool of `device` in the table, live or dead, under the table lock
    /// (fn may take the pools' own locks: they come after it).
    template <typename Fn> void for_each_pool_of(int device, Fn&& fn) const {
        std::lock_guard lock(mutex_);
        for (const auto& s : all_)
            if (s->device == device)
                fn(*s);
    }

    // ---- under the lock (lock()): reports and the C API's stats -----------------------------
    std::unique_lock<std::mutex> lock() const { return std::unique_lock(mutex_); }
    /// Every slot in the table, oldest first. Requires lock().
    const std::vector<std::unique_ptr<PoolSlot>>& all() const { return all_; }
    /// The pass-through ledger is kept per device; of the pools a device had (a reset makes a new
    /// one), the newest carries its figures, so each is counted once. Requires lock().
    bool carries_ledger(const PoolSlot* slot) const;

    // ---- fork ------------------------------------------------------------------------------
    /// Takes the table lock, then every pool's lock (the library's lock order).
    void lock_for_fork();
    void unlock_after_fork();
    /// In the child, with the locks still held by lock_for_fork: leak every slot (their owners
    /// live in the parent) and start empty, then unlock.
    void abandon_after_fork();

private:
    /// find_live in the chunks after the first (`n`: the live count read there).
    PoolSlot* find_live_beyond(CUcontext ctx, int n) const;
    struct LiveChunk {
        std::atomic<PoolSlot*> slots[kChunk] = {};
        std::atomic<LiveChunk*> next{nullptr};
    };
    /// Entry `i` of the live list (i < live_count_ or the next one to use); requires mutex_.
    std::atomic<PoolSlot*>* live_entry(int i) const;
    /// Calls fn(entry) for each used entry of the live list; requires mutex_.
    template <typename Fn> void for_each_entry(Fn&& fn) const {
        const int n = live_count_.load(std::memory_order_relaxed);
        for (int i = 0; i < n; ++i)
            fn(*live_entry(i));
    }
    /// Hands the dead slots beyond the latest kKeptDead that may go to `retire` and deletes them.
    void retire_old(const Retire& retire); // requires mutex_
    /// An entry of the live list whose pool is dead or that was never used (a new chunk when all
    /// are taken); null when host memory runs out. Requires mutex_.
    std::atomic<PoolSlot*>* free_live_entry();
    PoolSlot* publish(std::unique_ptr<PoolSlot> slot, CUcontext ctx, std::atomic<PoolSlot*>* entry); // requires mutex_

    mutable std::mutex mutex_;
    mutable LiveChunk first_;        ///< atomics: written under mutex_, read without it
    std::atomic<int> live_count_{0}; ///< entries [0, live_count_) of the live list have ever been used
    int next_index_ = 0;             ///< the next pool's number (requires mutex_)
    std::vector<std::unique_ptr<PoolSlot>> all_;
    std::vector<PoolSlot*> dead_; ///< the dead slots in all_, in the order their contexts died
};

} // namespace gpumemprof::core
