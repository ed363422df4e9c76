// SPDX-License-Identifier: MIT
// What the profiler's handling of PyTorch's allocator events costs: the time from a tracker
// call's entry to its return, on the thread that made the event (under PyTorch's allocator
// mutex, so the program waits for all of it), the time the profiler's own thread spent on the
// events handed to it (core/torch_queue.hpp), and the parts of both, summed over the run. Ticks
// of util::CycleClock; the report turns them into seconds.
#pragma once

#include "report/report_input.hpp"
#include "util/cycle_clock.hpp"

#include <atomic>
#include <cstdint>

namespace gpumemprof::core {

class EventCost {
public:
    enum Part : int {
        whole,    ///< the whole handler, on the thread that made the event
        stacks,   ///< capturing the allocating thread's stack
        backward, ///< charging a backward allocation to its forward line
        traits,   ///< what a call site's frames say for its kind (on the allocating thread, once a site)
        kinds,    ///< the kind of memory (categories, timeline)
        mirror,   ///< rebuilding the allocator's blocks and statistics
        handover, ///< handing the event to the profiler's thread
        deferred, ///< the profiler's thread, handling the events handed to it
        kParts
    };

    /// Each thread times its first kTimedFirst events, each once; after them one event in
    /// kOneIn (reading the clock costs too), whose ticks count kOneIn times. Events are counted
    /// exactly. (Sampling from a thread's first event on weighted that event, with its one-time
    /// work, kOneIn times: a child process with 4 events read 16 times its real cost.)
    static constexpr std::uint32_t kOneIn = 16;
    static constexpr std::uint32_t kTimedFirst = 256;

    /// Adds `weight` times the ticks since `start` to `part` and returns now (the next part's start).
    std::uint64_t add(Part part, std::uint64_t start, std::uint32_t weight = 1) noexcept {
        const std::uint64_t now = util::CycleClock::now();
        ticks_[part].fetch_add((now - start) * weight, std::memory_order_relaxed);
        return now;
    }
    void count() noexcept { events_.fetch_add(1, std::memory_order_relaxed); }

    /// One handler's clock: counts the event, and times it when it is one of its thread's
    /// first kTimedFirst or, after them, its one in kOneIn (otherwise lap() and done() do nothing).
    class Clock {
    public:
        explicit Clock(EventCost& cost) noexcept;
        /// The profiler's own thread: the event was counted where it was made.
        struct Uncounted {};
        Clock(EventCost& cost, Uncounted) noexcept;
        /// The laps start now (what came before counts in the whole only).
        void mark() noexcept {
            if (cost_ != nullptr)
                last_ = util::CycleClock::now();
        }
        /// The time since the previous lap (or the mark, or the start) goes to `part`.
        void lap(Part part) noexcept {
            if (cost_ != nullptr)
                last_ = cost_->add(part, last_, weight_);
        }
        /// The time since the start goes to `whole` (or `part`).
        void done(Part part = whole) noexcept {
            if (cost_ != nullptr)
                cost_->add(part, start_, weight_);
        }
        /// Whether this event is timed (its laps count, with its weight).
        bool timed() const noexcept { return cost_ != nullptr; }
        /// `ticks` of a rare costly path inside the current part (a new call site's frames read
        /// once), timed by the caller in every event, timed or not: counted once, in `part` and
        /// in the whole, and left out of this event's weighted laps. A path taken once in
        /// thousands of events would otherwise count kOneIn times or not at all.
        void exact(Part part, std::uint64_t ticks) noexcept {
            all_->ticks_[part].fetch_add(ticks, std::memory_order_relaxed);
            all_->ticks_[whole].fetch_add(ticks, std::memory_order_relaxed);
            if (cost_ != nullptr) {
                start_ += ticks;
                last_ += ticks;
            }
        }

    private:
        EventCost* all_;
        EventCost* cost_ = nullptr;
        std::uint32_t weight_ = 1;
        std::uint64_t start_ = 0, last_ = 0;
    };
    void clear() noexcept {
        events_.store(0, std::memory_order_relaxed);
        for (auto& t : ticks_)
            t.store(0, std::memory_order_relaxed);
    }

    /// For the report: seconds per part, with the clock's calibration.
    report::EventCostSummary summary() const noexcept;

private:
    std::atomic<std::uint64_t> events_{0};
    std::atomic<std::uint64_t> ticks_[kParts] = {};
    util::CycleClock clock_;
};

} // namespace gpumemprof::core
