// SPDX-License-Identifier: MIT
// The pools, one per CUDA context: every slot ever made (a destroyed context's slot stays, dead,
// for the report) and the live ones, which the hot path reads without a lock.
#pragma once

#include "core/driver_backend.hpp"
#include "core/memory_categories.hpp"
#include "pool/device_pool.hpp"
#include "pool/pool_model.hpp"
#include "pool/torch_mirror.hpp"

#include "core/cuda_api.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace gpumemprof::core {

class PoolEvents;

/// One CUDA context's pool. Never deleted while the process runs: a destroyed context's slot is
/// marked dead (its statistics stay for the report).
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
    static constexpr int kMaxLive = 64;

    /// Call fn(slot) for each live pool until it returns true. No allocation, no lock.
    template <typename Fn> void for_each_live(Fn&& fn) const {
        const int n = live_count_.load(std::memory_order_acquire);
        for (int i = 0; i < n; ++i) {
            PoolSlot* s = live_[i].load(std::memory_order_acquire);
            if (s && s->ctx.load(std::memory_order_acquire) && fn(s))
                return;
        }
    }
    /// The live pool of `ctx`, or null. No lock (the hot path's lookup).
    PoolSlot* find_live(CUcontext ctx) const {
        PoolSlot* found = nullptr;
        for_each_live([&](PoolSlot* s) {
            found = s->ctx.load(std::memory_order_acquire) == ctx ? s : nullptr;
            return found != nullptr;
        });
        return found;
    }

    /// The live pool of `ctx`; if there is none, make(index) builds one (with `ctx` not yet
    /// set), which is then published. Null when kMaxLive contexts are live or make returns null.
    /// Takes the table lock (make runs under it).
    template <typename Make> PoolSlot* find_or_add(CUcontext ctx, Make&& make) {
        std::lock_guard lock(mutex_);
        if (PoolSlot* p = find_live(ctx)) // another thread may have won the race
            return p;
        const int free_index = free_live_index();
        if (free_index < 0)
            return nullptr;
        std::unique_ptr<PoolSlot> slot = make(static_cast<int>(all_.size()));
        if (!slot)
            return nullptr;
        return publish(std::move(slot), ctx, free_index);
    }

    /// Mark ctx's pool dead: its blocks and fences are forgotten without driver calls.
    void drop(CUcontext ctx);
    /// The live primary contexts of `device`.
    std::vector<CUcontext> primary_contexts(int device) const;

    /// Call fn(slot) for every pool `device` ever had, live or dead, outside the table lock.
    template <typename Fn> void for_each_pool_of(int device, Fn&& fn) const {
        for (PoolSlot* s : slots_of(device))
            fn(*s);
    }

    // ---- under the lock (lock()): reports and the C API's stats -----------------------------
    std::unique_lock<std::mutex> lock() const { return std::unique_lock(mutex_); }
    /// Every slot, oldest first (slots are only ever appended). Requires lock().
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
    std::vector<PoolSlot*> slots_of(int device) const;
    int free_live_index() const;                                                      // requires mutex_
    PoolSlot* publish(std::unique_ptr<PoolSlot> slot, CUcontext ctx, int live_index); // requires mutex_

    mutable std::mutex mutex_;
    std::atomic<PoolSlot*> live_[kMaxLive] = {};
    std::atomic<int> live_count_{0}; ///< entries [0, live_count_) of live_ have ever been used
    std::vector<std::unique_ptr<PoolSlot>> all_;
};

} // namespace gpumemprof::core
