// SPDX-License-Identifier: MIT
// pool::Backend over the real driver for one context. Fences are CUDA events recorded on the
// legacy default stream (which orders after all prior work of every blocking stream, the
// per-thread default streams included) and on every live non-blocking stream of the context.
#pragma once

#include "core/driver_api.hpp"
#include "pool/backend.hpp"

#include "core/cuda_api.hpp"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpumemprof::core {

class StreamRegistry;

class DriverBackend final : public pool::Backend {
public:
    DriverBackend(const DriverApi& api, CUcontext ctx, StreamRegistry& streams);
    ~DriverBackend() override = default; // events are left to the context's own teardown

    int allocate(std::size_t size, std::uintptr_t* ptr) override;
    int release(std::uintptr_t ptr, std::size_t size) override;
    int memory_info(std::size_t* free_bytes, std::size_t* total_bytes) override;
    pool::FenceId fence_record() override;
    bool fence_done(pool::FenceId fence) override;
    bool fence_wait(pool::FenceId fence) override;
    bool fence_wait_for(pool::FenceId fence, std::uint64_t limit_ns) override;
    void fence_release(pool::FenceId fence) override;
    bool frees_ordered() override;

    /// Forget all events without driver calls (the context is gone, or we are in a fork child).
    void forget();

private:
    /// One fence: its events (one per stream it covers, plus those left by destroyed streams).
    /// Slots and their vectors are reused, so recording a fence allocates nothing in steady state.
    struct Fence {
        pool::FenceId id = 0; ///< 0: free slot
        std::vector<CUevent> events;
    };
    CUevent take_event();
    std::size_t take_slot();               // requires mutex_; may allocate (slot growth only)
    Fence* find(pool::FenceId fence);       // requires mutex_
    void copy_events(Fence& f);             // requires mutex_: into wait_events_
    const DriverApi& api_;
    CUcontext ctx_;
    StreamRegistry& streams_;
    std::mutex mutex_; // guards the members below (fences are used under the pool lock anyway)
    std::vector<CUevent> spare_events_;
    std::vector<Fence> fences_;
    std::vector<std::size_t> free_slots_;
    std::vector<CUstream> scratch_streams_; ///< reused by fence_record (called on many frees)
    std::vector<CUevent> wait_events_;      ///< reused by the waits
    std::uint64_t next_fence_ = 1;
};

/// Non-blocking streams per context, and the number of stream captures in progress.
class StreamRegistry {
public:
    void add(CUcontext ctx, CUstream stream);
    /// Before a stream is destroyed: if it is registered, record an event on it so that the next
    /// fence of its context still covers the work queued there.
    void remove(const DriverApi& api, CUstream stream);
    /// Appends the streams of `ctx` and the events left by its destroyed streams (handed over).
    /// Allocates only when a vector has to grow.
    void fence_targets(CUcontext ctx, std::vector<CUstream>* streams, std::vector<CUevent>* orphans);
    /// Hand back events taken by fence_targets when the fence could not be completed.
    void return_orphans(CUcontext ctx, std::vector<CUevent> events);
    void forget_context(CUcontext ctx);
    void clear();
    void lock_for_fork() { mutex_.lock(); }
    void unlock_after_fork() { mutex_.unlock(); }

    std::atomic<int> captures{0};

    /// Once the program may queue work in more than one order (it created a stream, used a
    /// per-thread default stream, or made a second context), freed blocks must wait for fences
    /// (pool::Backend::frees_ordered). Never goes back.
    void mark_unordered() noexcept { unordered_.store(true, std::memory_order_release); }
    bool unordered() const noexcept { return unordered_.load(std::memory_order_acquire); }

private:
    std::mutex mutex_;
    std::unordered_map<CUstream, CUcontext> stream_ctx_;
    std::unordered_map<CUcontext, std::vector<CUevent>> orphans_;
    std::atomic<bool> unordered_{false};
};

/// Makes `ctx` current for a scope when it is not already (backend calls may come from a thread
/// whose current context differs, e.g. empty_cache from the C API).
class ScopedContext {
public:
    ScopedContext(const DriverApi& api, CUcontext ctx);
    ~ScopedContext();
    ScopedContext(const ScopedContext&) = delete;
    ScopedContext& operator=(const ScopedContext&) = delete;

private:
    const DriverApi& api_;
    bool pushed_ = false;
};

} // namespace gpumemprof::core
