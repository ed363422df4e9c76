// SPDX-License-Identifier: MIT
#include "core/step_marks.hpp"

namespace gpumemprof::core {

std::int64_t StepMarks::add(report::StepMark mark) {
    std::lock_guard lock(mutex_);
    if (mark.step < 0)
        mark.step = last_ + 1;
    last_ = mark.step;
    const std::int64_t step = mark.step;
    if (ring_.size() < kMaxSteps) {
        ring_.push_back(std::move(mark));
    } else {
        ring_[next_] = std::move(mark);
        next_ = (next_ + 1) % kMaxSteps;
        ++dropped_;
    }
    return step;
}

std::vector<report::StepMark> StepMarks::marks(std::uint64_t* dropped) const {
    std::lock_guard lock(mutex_);
    std::vector<report::StepMark> out;
    out.reserve(ring_.size());
    for (std::size_t i = 0; i < ring_.size(); ++i)
        out.push_back(ring_[(next_ + i) % ring_.size()]);
    *dropped = dropped_;
    return out;
}

void StepMarks::clear() {
    std::lock_guard lock(mutex_);
    ring_.clear();
    next_ = 0;
    dropped_ = 0;
    last_ = -1;
}

} // namespace gpumemprof::core
