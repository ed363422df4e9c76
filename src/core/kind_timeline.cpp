// SPDX-License-Identifier: MIT
#include "core/kind_timeline.hpp"

#include "util/swallowed.hpp"

#include <algorithm>
#include <cstdlib>

namespace gpumemprof::core {

KindTimeline::KindTimeline(std::size_t capacity, std::int64_t min_step)
    : capacity_(std::max<std::size_t>(4, (capacity + 1) & ~std::size_t{1})),
      min_step_(std::max<std::int64_t>(1, min_step)) {
    try {
        points_.reserve(capacity_); // sized once: a change never allocates
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void KindTimeline::change(std::int64_t t_ns, const TimelineBytes& now) {
    if (has_latest_)
        t_ns = std::max(t_ns, latest_.t_ns);
    ++changes_;
    latest_ = KindPoint{t_ns, now};
    has_latest_ = true;
    const std::int64_t total = latest_.total();
    if (total > peak_total_) {
        peak_total_ = total;
        peak_ = latest_;
    }
    if (points_.empty()) {
        points_.push_back(latest_);
        slot_start_ = t_ns;
        return;
    }
    KindPoint& last = points_.back();
    if (slot_ns_ > 0 && t_ns - slot_start_ < slot_ns_) {
        if (total > last.total())
            last = latest_; // the slot keeps its fullest moment
        return;
    }
    std::int64_t moved = 0;
    for (int k = 0; k < kTimelineKinds; ++k)
        moved += std::llabs(now[k] - last.bytes[k]);
    if (moved < std::max(min_step_, last.total() / 100))
        return;
    points_.push_back(latest_);
    slot_start_ = t_ns;
    if (points_.size() >= capacity_)
        thin();
}

void KindTimeline::thin() {
    std::size_t out = 0;
    for (std::size_t i = 0; i + 1 < points_.size(); i += 2, ++out)
        points_[out] = points_[i + 1].total() > points_[i].total() ? points_[i + 1] : points_[i];
    if (points_.size() % 2)
        points_[out++] = points_.back();
    points_.resize(out);
    const std::int64_t span = points_.back().t_ns - points_.front().t_ns;
    slot_ns_ = std::max({slot_ns_ * 2, span / static_cast<std::int64_t>(capacity_ / 2), std::int64_t{1}});
    slot_start_ = points_.back().t_ns;
}

std::size_t KindTimeline::reclassify(std::int64_t since_ns, int from, int to, std::int64_t bytes) {
    if (from < 0 || from >= kTimelineKinds || to < 0 || to >= kTimelineKinds || from == to)
        return 0;
    const auto move = [&](KindPoint& p) {
        p.bytes[from] -= bytes;
        p.bytes[to] += bytes;
    };
    auto it = std::lower_bound(points_.begin(), points_.end(), since_ns,
                               [](const KindPoint& p, std::int64_t t) { return p.t_ns < t; });
    const auto moved = static_cast<std::size_t>(points_.end() - it);
    for (; it != points_.end(); ++it)
        move(*it);
    if (peak_total_ >= 0 && peak_.t_ns >= since_ns)
        move(peak_);
    if (has_latest_ && latest_.t_ns >= since_ns)
        move(latest_);
    return moved;
}

KindTimelineData KindTimeline::data() const {
    KindTimelineData d;
    d.changes = changes_;
    d.slot_ns = slot_ns_;
    try {
        d.points.reserve(points_.size() + 2);
        bool peak_placed = peak_total_ < 0;
        for (const KindPoint& p : points_) {
            if (!peak_placed && peak_.t_ns <= p.t_ns) {
                if (peak_.t_ns < p.t_ns || peak_.bytes != p.bytes)
                    d.points.push_back(peak_);
                peak_placed = true;
            }
            // Two moments of one time (a peak replaced by a later point of the same instant):
            // the later state holds.
            if (!d.points.empty() && d.points.back().t_ns == p.t_ns)
                d.points.back() = p;
            else
                d.points.push_back(p);
        }
        if (!peak_placed)
            d.points.push_back(peak_);
        // The latest state ends the series (the bytes of the last point may have held since).
        if (has_latest_ &&
            (d.points.empty() || d.points.back().bytes != latest_.bytes || d.points.back().t_ns != latest_.t_ns)) {
            if (!d.points.empty() && d.points.back().t_ns == latest_.t_ns)
                d.points.back() = latest_;
            else
                d.points.push_back(latest_);
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return d;
}

} // namespace gpumemprof::core
