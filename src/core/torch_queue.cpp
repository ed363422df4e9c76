// SPDX-License-Identifier: MIT
#include "core/torch_queue.hpp"

#include "core/core_scope.hpp"

#include <pthread.h>
#include <signal.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>

namespace gpumemprof::core {
namespace {

using std::chrono::milliseconds;

// The queue's own thread: a drain from there would wait for itself.
thread_local bool t_queue_thread = false;

// A push wakes a sleeping thread once this many events wait (a wake is a system call: a loop's
// events should not each pay one); otherwise the thread looks every few milliseconds.
constexpr std::size_t kWakeAt = 256;
constexpr milliseconds kBusyPoll{1};  // while events keep coming
constexpr milliseconds kIdlePoll{50}; // after kIdleRounds empty looks
constexpr int kIdleRounds = 100;

// A stall is declared only by a waiter that looked this many times without seeing a beat.
constexpr int kStallLooks = 20;

// How many events ahead of the one written a push asks for its line.
constexpr std::size_t kAhead = 4;

// A line asked for with the intent to write it (PREFETCHW where the processor has it, a plain
// prefetch elsewhere): a hint, which never faults.
void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__)
    static const bool prefetchw = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid(0x80000001u, &a, &b, &c, &d) != 0 && (c & (1u << 8)) != 0; // PRFCHW
    }();
    if (prefetchw) {
        asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
        return;
    }
#endif
    __builtin_prefetch(p, 1, 3);
}

} // namespace

bool TorchQueue::start() noexcept {
    // Born with every signal blocked (a thread inherits its creator's mask): the program's
    // signals are never delivered to our thread, where its handlers would run inside the profiler.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    bool made = false;
    try {
        waiting_.reserve(4096);
        batch_.reserve(4096);
        std::thread([this] { run(); }).detach();
        made = true;
    } catch (...) {
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    started_ = true;
    alive_ = made;
    seen_at_ = std::chrono::steady_clock::now();
    return made;
}

bool TorchQueue::stalled(int& looks) noexcept {
    if (abandoned_.load(std::memory_order_relaxed))
        return true;
    const auto now = std::chrono::steady_clock::now();
    if (const std::uint64_t beat = progress_.load(std::memory_order_relaxed); beat != seen_progress_) {
        seen_progress_ = beat;
        seen_at_ = now;
        looks = 0;
        return false;
    }
    // Both: long enough without a beat, and this waiter looked often enough meanwhile. A process
    // stopped and resumed (SIGSTOP, a debugger) finds the time passed at its first look, before
    // our thread had a chance to run again: that is not a stall.
    if (done_ >= pushed_ || ++looks < kStallLooks || now - seen_at_ < stall_limit_)
        return false;
    dropped_ += waiting_.size();
    waiting_.clear();
    abandoned_.store(true, std::memory_order_release);
    handled_.notify_all();
    return true;
}

bool TorchQueue::push(const Event& e) noexcept {
    try {
        std::unique_lock lock(mutex_);
        if (abandoned_.load(std::memory_order_relaxed)) {
            ++dropped_;
            return true;
        }
        if (stopped_)
            return false;
        if (!started_ && !start()) {
            stopped_ = true;
            return false;
        }
        // A block's completion right after its free (PyTorch reports the two in a row, under its
        // mutex, when no other stream used the block): the free waiting last takes it.
        if (e.ev.action == TorchAction::free_completed && !waiting_.empty()) {
            Event& last = waiting_.back();
            if (last.ev.action == TorchAction::free_requested && !last.completed && last.ev.addr == e.ev.addr &&
                last.ev.device == e.ev.device && last.slot == e.slot) {
                last.completed = true;
                ++folded_;
                return true;
            }
        }
        int looks = 0;
        while (waiting_.size() >= capacity_) {
            hurry_ = true;
            wake_.notify_one();
            handled_.wait_for(lock, kBusyPoll);
            if (stalled(looks)) {
                ++dropped_;
                return true;
            }
            if (stopped_)
                return false;
        }
        waiting_.push_back(e);
        // The next events' lines, made this thread's for writing ahead of time: the buffer
        // comes back from the profiler's thread, whose cache holds them since it read the last
        // batch, and a write that has to fetch them would wait at the unlock below.
        if (waiting_.size() + kAhead < waiting_.capacity())
            prefetch_for_write(waiting_.data() + waiting_.size() + kAhead);
        ++pushed_;
        most_waiting_ = std::max(most_waiting_, waiting_.size());
        if (sleeping_ && waiting_.size() >= kWakeAt)
            wake_.notify_one();
        return true;
    } catch (...) {
        return false;
    }
}

void TorchQueue::run() noexcept {
    t_queue_thread = true;
    pthread_setname_np(pthread_self(), "gpumemprof-ev");
    std::unique_lock lock(mutex_);
    int idle = 0;
    for (;;) {
        progress_.store(progress_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        if (abandoned_.load(std::memory_order_relaxed))
            break; // it came back after all: what it would handle was dropped
        if (waiting_.empty()) {
            if (stopped_)
                break;
            sleeping_ = true;
            wake_.wait_for(lock, idle < kIdleRounds ? kBusyPoll : kIdlePoll);
            sleeping_ = false;
            if (waiting_.empty() && idle < kIdleRounds)
                ++idle;
            continue;
        }
        idle = 0;
        hurry_ = false;
        batch_.swap(waiting_);
        lock.unlock();
        {
            CoreScope scope;
            for (const Event& e : batch_) {
                handler_(e);
                progress_.store(progress_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
            }
        }
        const std::size_t n = batch_.size();
        batch_.clear();
        lock.lock();
        done_ += n;
        handled_.notify_all();
    }
    alive_ = false;
    handled_.notify_all();
}

bool TorchQueue::drain(int timeout_ms) noexcept {
    if (t_queue_thread)
        return true;
    try {
        std::unique_lock lock(mutex_);
        const std::uint64_t target = pushed_;
        if (done_ >= target)
            return true;
        if (abandoned_.load(std::memory_order_relaxed))
            return false;
        hurry_ = true;
        wake_.notify_one();
        const auto until = std::chrono::steady_clock::now() + milliseconds(timeout_ms);
        // Looks at the thread's heartbeat often enough to see kStallLooks within the stall limit.
        const auto look = std::clamp(stall_limit_ / (2 * kStallLooks), milliseconds(1), milliseconds(100));
        int looks = 0;
        while (done_ < target) {
            if (stalled(looks) || std::chrono::steady_clock::now() >= until)
                return false;
            handled_.wait_until(lock, std::min(until, std::chrono::steady_clock::now() + look));
        }
        return true;
    } catch (...) {
        return false;
    }
}

void TorchQueue::stop() noexcept {
    drain();
    try {
        std::unique_lock lock(mutex_);
        stopped_ = true;
        wake_.notify_one();
        // The thread handles what was pushed meanwhile, then ends.
        if (!t_queue_thread)
            handled_.wait_for(lock, milliseconds(2000), [&] { return !alive_; });
    } catch (...) {
    }
}

bool TorchQueue::running() const noexcept {
    std::lock_guard lock(mutex_);
    return alive_ && !stopped_;
}

void TorchQueue::reset_after_fork() noexcept {
    // The parent's thread may have been waiting on a condition variable: the child's copies
    // are made anew (not destroyed: that would wait for the waiter). The lock is this thread's
    // (lock_for_fork), released last.
    new (&wake_) std::condition_variable();
    new (&handled_) std::condition_variable();
    waiting_.clear();
    batch_.clear();
    pushed_ = done_ = folded_ = dropped_ = 0;
    abandoned_.store(false, std::memory_order_relaxed);
    started_ = alive_ = sleeping_ = hurry_ = false;
    mutex_.unlock();
}

std::uint64_t TorchQueue::pushed() const noexcept {
    std::lock_guard lock(mutex_);
    return pushed_ + folded_;
}

std::uint64_t TorchQueue::dropped() const noexcept {
    std::lock_guard lock(mutex_);
    return dropped_;
}

void TorchQueue::count_dropped() noexcept {
    std::lock_guard lock(mutex_);
    ++dropped_;
}

std::size_t TorchQueue::most_waiting() const noexcept {
    std::lock_guard lock(mutex_);
    return most_waiting_;
}

} // namespace gpumemprof::core
