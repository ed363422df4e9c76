// SPDX-License-Identifier: MIT
// The steps the program marked (gpumemprof_mark_step): when each began and what each device's
// pool held then, the latest kMaxSteps kept, for the JSON report's "steps".
#pragma once

#include "report/report_input.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpumemprof::core {

/// Thread-safe; its lock is a leaf (nothing else is taken while it is held).
class StepMarks {
public:
    static constexpr std::size_t kMaxSteps = 16384;

    /// Records `mark`; a negative mark.step becomes the previous step's number + 1 (0 at first).
    /// Returns the step's number.
    std::int64_t add(report::StepMark mark);
    /// The kept marks, oldest first, and how many older ones were dropped.
    std::vector<report::StepMark> marks(std::uint64_t* dropped) const;
    /// A fork child's first CUDA use: the parent's steps are the parent's.
    void clear();

    void lock_for_fork() { mutex_.lock(); }
    void unlock_after_fork() { mutex_.unlock(); }

private:
    mutable std::mutex mutex_;
    std::vector<report::StepMark> ring_; ///< up to kMaxSteps; `next_` is the oldest once full
    std::size_t next_ = 0;
    std::uint64_t dropped_ = 0;
    std::int64_t last_ = -1;
};

} // namespace gpumemprof::core
