// SPDX-License-Identifier: MIT
// PyTorch's block events, handed from the thread that made them to one thread of the profiler's
// own. The allocating thread reads only what it alone can tell (its stack, the autograd node it
// runs or its place in the forward pass, the time-stamp counter) and pushes the event; the
// profiler's thread rebuilds the allocator's blocks and the kinds of memory from the events in
// the order they were pushed (core/profiler_torch.cpp), and joins backward stacks to forward
// ones. Under PyTorch's allocator mutex, the program then waits for a push, not for the
// bookkeeping.
//
// Whoever reads what the events build (a report, the C API's statistics, a segment event, an
// OOM) first drains the queue: every event pushed before the call is handled when it returns.
// Once stopped (at exit, or when the thread could not start), push() refuses and the caller
// handles the event itself, as it does with GPUMEMPROF_TORCH_THREAD=0.
//
// A thread that stops making progress (a bug of ours: it has happened) must not stop the
// program. When events wait and the thread has finished nothing for `stall_limit` while a
// drain or a full push waits for it, the queue is *abandoned*: what waits and every later event
// is dropped (counted), drains and pushes return at once, and the caller stops following
// PyTorch's allocator and says so.
#pragma once

#include "core/memory_categories.hpp"
#include "core/torch_attach.hpp"
#include "core/torch_autograd.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpumemprof::core {

struct PoolSlot;

/// One block event with what only the allocating thread could tell.
struct TorchBlockEvent {
    TorchEvent ev;
    PoolSlot* slot = nullptr; ///< the device's mirror
    std::uint32_t stack = 0;  ///< the allocation's call site as captured (0: none)
    /// An allocation: the autograd node the thread evaluated (backward), else the thread's place
    /// in the forward pass. The handler charges the one to the other (core/torch_autograd.hpp).
    TorchAutograd::Node node;
    std::uint64_t fwd_thread = 0, fwd_seq = 0;
    bool in_backward = false; ///< freed while autograd evaluated a node
    bool completed = false;   ///< a free_requested whose free_completed came right after it
    /// Its site's traits, worked out on the allocating thread: that may ask the dynamic loader
    /// (dladdr, under its lock), which the profiler's thread never does, so that a drain
    /// from inside a library's constructor cannot wait for it.
    MemoryCategories::SiteTraits traits;
    std::uint64_t ticks = 0; ///< util::CycleClock at the event (its time, in the history and the kinds)
};

class TorchQueue {
public:
    using Event = TorchBlockEvent;
    using Handler = void (*)(const Event&) noexcept;

    /// `handler` runs on the queue's thread, once per event, in push order. More than
    /// `capacity` waiting events make push() wait for the thread (a bound on our memory).
    explicit TorchQueue(Handler handler, std::size_t capacity = std::size_t{1} << 16,
                        std::chrono::milliseconds stall_limit = std::chrono::seconds(10)) noexcept
        : handler_(handler), capacity_(capacity), stall_limit_(stall_limit) {}

    /// Queues `e` (starting the thread at the first push); false when stopped: handle it yourself.
    /// Abandoned: drops it (true).
    /// A free_completed whose block's free_requested is the event waiting last is not queued:
    /// that free is marked `completed` (PyTorch reports the two in a row, under its mutex, when
    /// no other stream used the block), and the handler handles both.
    bool push(const Event& e) noexcept;
    /// Returns once every event pushed before the call was handled (at most `timeout_ms`; false
    /// when the wait timed out, or the queue is or became abandoned). At once on the queue's own
    /// thread and when nothing waits.
    bool drain(int timeout_ms = 10000) noexcept;
    /// Drains, then refuses later pushes; the thread ends.
    void stop() noexcept;
    bool running() const noexcept;

    /// pthread_atfork: the queue's lock is held across fork (it is taken last: nothing waits
    /// for another lock while holding it). In the child the thread is gone: the events the
    /// parent had not handled are dropped with the parent's state, and a later push starts a
    /// new thread.
    void lock_for_fork() noexcept { mutex_.lock(); }
    void unlock_after_fork() noexcept { mutex_.unlock(); }
    void reset_after_fork() noexcept;

    /// Events pushed so far (folded completions included), and the most that waited at once.
    std::uint64_t pushed() const noexcept;
    std::size_t most_waiting() const noexcept;
    /// The thread stalled (above): events are dropped from then on. Lock-free.
    bool abandoned() const noexcept { return abandoned_.load(std::memory_order_acquire); }
    /// Events dropped since (those waiting then included).
    std::uint64_t dropped() const noexcept;
    /// One more event dropped: one its maker did not push, the queue being abandoned.
    void count_dropped() noexcept;

private:
    void run() noexcept;
    bool start() noexcept; // requires mutex_
    /// Events wait, the thread's heartbeat has not moved for stall_limit_ and this waiter looked
    /// at it `looks` times meanwhile (counted here): abandons. Requires mutex_.
    bool stalled(int& looks) noexcept;

    Handler handler_;
    std::size_t capacity_;
    std::chrono::milliseconds stall_limit_;
    /// The thread's heartbeat: one more at each look at the queue and each event handled. A
    /// waiter compares it with what it saw last (at `seen_at_`) to tell slow from stuck.
    std::atomic<std::uint64_t> progress_{0};
    std::uint64_t seen_progress_ = 0;
    std::chrono::steady_clock::time_point seen_at_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;    ///< the thread: work to do, a drain, or the stop
    std::condition_variable handled_; ///< drains, full pushes and the stop: a batch is handled
    std::vector<Event> waiting_, batch_;
    std::uint64_t pushed_ = 0, done_ = 0; ///< queued events, handled events (a folded completion is neither)
    std::uint64_t folded_ = 0;            ///< completions folded into the free before them
    std::uint64_t dropped_ = 0;           ///< events dropped once abandoned
    std::atomic<bool> abandoned_{false};
    std::size_t most_waiting_ = 0;
    bool started_ = false;  ///< a thread was started (in this process)
    bool alive_ = false;    ///< it has not ended
    bool stopped_ = false;  ///< pushes are refused
    bool sleeping_ = false; ///< it waits for work
    bool hurry_ = false;    ///< someone waits for it: handle what waits now
};

} // namespace gpumemprof::core
