// SPDX-License-Identifier: MIT
// Live bytes by kind of memory (core/memory_categories.hpp) over time, for the stacked timeline
// of the reports. Each point is one exact moment (the bytes of every kind then, so a stack of the
// kinds is a state that existed). A change becomes a point when it moved the bytes far enough
// from the last point: the sum over the kinds of |now - last point| is at least the step,
// max(min_step, the last point's total / 100); so a kind that turns into another one (a
// temporary that outlives its optimizer step) is a point though the total stays. Bounded: when
// the points reach the capacity, of each pair of neighbours the one with more bytes in all is
// kept, and from then on changes closer in time than a slot (twice the previous slot, at least
// the run so far / half the capacity) to the last point replace it when they hold more bytes;
// so peaks survive thinning. The moment of the largest total (first reached) and the latest
// state (which ends the series) are kept beside the points and put in place by data(). Not
// thread-safe (the owner serialises).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumemprof::core {

inline constexpr int kTimelineKinds = 8; ///< core::kMemoryKinds (checked there)
using TimelineBytes = std::array<std::int64_t, kTimelineKinds>;

struct KindPoint {
    std::int64_t t_ns = 0; ///< since the profiler started
    TimelineBytes bytes{};
    std::int64_t total() const {
        std::int64_t s = 0;
        for (std::int64_t b : bytes)
            s += b;
        return s;
    }
};

/// A copy for the reports.
struct KindTimelineData {
    std::vector<KindPoint> points; ///< in time order, the peak and the latest state included
    std::uint64_t changes = 0;     ///< changes seen in all
    std::int64_t slot_ns = 0;      ///< 0 while no thinning happened
};

class KindTimeline {
public:
    static constexpr std::size_t kDefaultCapacity = 2048; ///< points: 2048 x 72 B = 144 KiB
    static constexpr std::int64_t kDefaultMinStep = 1 << 20;

    /// `capacity` is rounded up to an even number >= 4.
    explicit KindTimeline(std::size_t capacity = kDefaultCapacity, std::int64_t min_step = kDefaultMinStep);

    /// The bytes of each kind are `now` since `t_ns` (non-decreasing across calls: an earlier
    /// time is taken as the latest one).
    void change(std::int64_t t_ns, const TimelineBytes& now);
    /// `bytes` allocated at `since_ns` and live since then turn out to have been kind `to`, not
    /// `from`, all along (a temporary that outlived its phase): every point from then on, the
    /// peak's and the latest state move them.
    /// Returns the points it moved.
    std::size_t reclassify(std::int64_t since_ns, int from, int to, std::int64_t bytes);
    KindTimelineData data() const;
    std::size_t size() const { return points_.size(); }

private:
    void thin();

    std::size_t capacity_;
    std::int64_t min_step_;
    std::vector<KindPoint> points_;
    std::int64_t slot_ns_ = 0;
    std::int64_t slot_start_ = 0; ///< when the last point's slot began
    std::uint64_t changes_ = 0;
    bool has_latest_ = false;
    KindPoint latest_, peak_;
    std::int64_t peak_total_ = -1;
};

} // namespace gpumemprof::core
