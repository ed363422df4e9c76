// SPDX-License-Identifier: MIT
// Non-blocking streams per context and stream captures in progress: what a fence must cover.
#pragma once

#include "core/driver_api.hpp"

#include "core/cuda_api.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpumemprof::core {

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

} // namespace gpumemprof::core
