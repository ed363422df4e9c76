// SPDX-License-Identifier: MIT
// Non-blocking streams per context and stream captures in progress: what a fence must cover.
#pragma once

#include "core/driver_api.hpp"

#include "core/cuda_api.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpumemprof::core {

/// Why freed blocks stopped being reused at once (GPUMEMPROF_REUSE=auto).
enum class OrderLoss : int { none, stream_created, per_thread_stream, second_context };

/// "a stream was created", ...: the reports' wording; "" for none.
const char* order_loss_text(OrderLoss why) noexcept;

/// Non-blocking streams per context, and the number of stream captures in progress.
class StreamRegistry {
public:
    // ---- what the stream and capture hooks tell it ----------------------------------------------
    /// A stream was created in `ctx` (the driver answered CUDA_SUCCESS). A non-blocking one runs
    /// apart from the legacy stream, so it must get fence events of its own, unless a joining
    /// library made it (`library_stream`, core/stream_origin.hpp: its work is joined into a
    /// program stream, which is fenced). Before anything runs on it, it waits for what the legacy
    /// stream has queued: blocks freed and reused at once before it existed may still be in use
    /// there (cudaFree would have waited for that work). No event is recorded during a capture.
    void created(const DriverApi& api, CUcontext ctx, CUstream stream, unsigned flags, bool library_stream) noexcept;
    /// A capture began when `r` is CUDA_SUCCESS; returns `r`.
    CUresult capture_begun(CUresult r) noexcept;
    /// cuStreamEndCapture(_ptsz) of `s`: `end` is the driver's call. One capture fewer when the
    /// stream was capturing before and is not after.
    template <typename End> CUresult end_capture(const DriverApi& api, CUstream s, bool ptsz, End&& end) noexcept {
        const bool was = capturing(api, s, ptsz);
        const CUresult r = end();
        if (was && !capturing(api, s, ptsz))
            capture_ended();
        return r;
    }

    void add(CUcontext ctx, CUstream stream);
    /// Before a stream is destroyed: if it is registered, record an event on it so that the next
    /// fence of its context still covers the work queued there.
    void remove(const DriverApi& api, CUstream stream);
    /// Calls `each(stream)` for every stream of `ctx` until one returns false, and appends the
    /// events left by its destroyed streams (handed over; allocates only when `orphans` grows).
    /// Under the registry's lock: remove() takes it before the program's cuStreamDestroy goes on,
    /// so no stream is destroyed while `each` records on it (another thread's stream could be,
    /// between a copied list and the record: the driver crashed on that handle). Returns whether
    /// every call returned true.
    template <typename Each> bool fence_targets(CUcontext ctx, std::vector<CUevent>* orphans, Each&& each) {
        std::lock_guard lock(mutex_);
        bool ok = true;
        for (const auto& [s, c] : stream_ctx_)
            if (c == ctx && !(ok = each(s)))
                break;
        auto it = orphans_.find(ctx);
        if (it != orphans_.end() && !it->second.empty()) {
            orphans->insert(orphans->end(), it->second.begin(), it->second.end());
            it->second.clear(); // keeps its capacity for the next destroyed stream
        }
        return ok;
    }
    /// Hand back events taken by fence_targets when the fence could not be completed.
    void return_orphans(CUcontext ctx, std::vector<CUevent> events);
    void forget_context(CUcontext ctx);
    void clear();
    void lock_for_fork() { mutex_.lock(); }
    void unlock_after_fork() { mutex_.unlock(); }

    std::atomic<int> captures{0};

    /// Once the program may queue work in more than one order (it created a stream, used a
    /// per-thread default stream, or made a second context), freed blocks must wait for fences
    /// (pool::Backend::frees_ordered). Never goes back. The first call's reason and call stack
    /// (a stacks::Recorder id, 0 when stacks are off) are kept for the reports.
    void mark_unordered(OrderLoss why = OrderLoss::stream_created, std::uint32_t stack = 0) noexcept {
        bool expected = false;
        if (unordered_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
            lost_stack_.store(stack, std::memory_order_relaxed);
            lost_by_.store(static_cast<int>(why), std::memory_order_release);
        }
    }
    bool unordered() const noexcept { return unordered_.load(std::memory_order_acquire); }
    OrderLoss lost_by() const noexcept { return static_cast<OrderLoss>(lost_by_.load(std::memory_order_acquire)); }
    std::uint32_t lost_stack() const noexcept { return lost_stack_.load(std::memory_order_relaxed); }

    /// Streams created inside a library that joins their work into its caller's stream (cuDNN's
    /// own streams, core/stream_origin.hpp): they leave the program in one order.
    void add_library_stream() noexcept { library_streams_.fetch_add(1, std::memory_order_relaxed); }
    int library_streams() const noexcept { return library_streams_.load(std::memory_order_relaxed); }

private:
    /// Whether the driver says `s` is capturing (false when it cannot tell).
    static bool capturing(const DriverApi& api, CUstream s, bool ptsz) noexcept;
    void capture_ended() noexcept;

    std::mutex mutex_;
    std::unordered_map<CUstream, CUcontext> stream_ctx_;
    std::unordered_map<CUcontext, std::vector<CUevent>> orphans_;
    std::atomic<bool> unordered_{false};
    std::atomic<int> lost_by_{static_cast<int>(OrderLoss::none)};
    std::atomic<std::uint32_t> lost_stack_{0};
    std::atomic<int> library_streams_{0};
};

} // namespace gpumemprof::core
