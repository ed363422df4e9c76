// SPDX-License-Identifier: MIT
// One device's memory over time: allocated, reserved, waiting (freed by the program, not yet
// reusable: the pool's pending blocks) and the PyTorch model's reserved bytes. Every change is
// kept exactly until the capacity is reached; then neighbouring entries are merged pairwise into
// buckets that keep each series' minimum, maximum and last value, and later changes fall into
// buckets of the new width. So the size stays bounded for any run length and no peak is lost:
// a bucket's maximum is the maximum of everything merged into it. The moment allocated bytes
// first reached their maximum is kept exactly beside the buckets, with the OOM and empty_cache
// markers. Not thread-safe (the owner serialises; the pool's listener runs under its lock).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumemprof::stats {

enum class Series : int { allocated, reserved, waiting, model_reserved };
inline constexpr int kSeriesCount = 4;
inline constexpr const char* kSeriesNames[kSeriesCount] = {"allocated", "reserved", "waiting", "model_reserved"};

/// An exact point when t0 == t1 and min == max == last for every series.
struct SeriesBucket {
    std::int64_t t0_ns = 0; ///< first change in the bucket
    std::int64_t t1_ns = 0; ///< last change in the bucket
    std::array<std::int64_t, kSeriesCount> min{};
    std::array<std::int64_t, kSeriesCount> max{};
    std::array<std::int64_t, kSeriesCount> last{}; ///< the values after the bucket's last change
};

enum class MarkerKind : int { oom, empty_cache };

struct SeriesMarker {
    MarkerKind kind = MarkerKind::oom;
    std::int64_t t_ns = 0;
    std::int64_t bytes = 0; ///< OOM: the request; empty_cache: reserved bytes released
};

/// A copy for the report writers.
struct SeriesData {
    std::vector<SeriesBucket> buckets;           ///< in time order
    std::int64_t bucket_ns = 0;                  ///< current bucket width; 0 while every change is exact
    std::uint64_t changes = 0;                   ///< changes recorded in all
    std::int64_t peak_allocated = 0;             ///< maximum of allocated bytes ...
    std::int64_t peak_allocated_t_ns = -1;       ///< ... first reached then (-1: never above 0)
    std::int64_t reserved_at_peak_allocated = 0; ///< reserved bytes at that moment
    std::int64_t peak_reserved = 0;
    std::int64_t peak_reserved_t_ns = -1;
    std::vector<SeriesMarker> markers; ///< in time order, at most kMaxMarkers
    std::uint64_t markers_dropped = 0;
};

class TimeSeries {
public:
    static constexpr std::size_t kDefaultCapacity = 8192; ///< buckets: 8192 x 112 B = 896 KiB
    static constexpr std::size_t kMaxMarkers = 1024;

    /// `capacity` is rounded up to an even number >= 4.
    explicit TimeSeries(std::size_t capacity = kDefaultCapacity);

    /// Series `s` changed by `delta` at `t_ns` (nanoseconds since the process started;
    /// non-decreasing across calls: an earlier time is treated as the latest one). Inline: the
    /// pool's listener calls it on every allocation and free.
    __attribute__((always_inline)) void add(std::int64_t t_ns, Series s, std::int64_t delta) {
        current_[static_cast<int>(s)] += delta;
        record(t_ns, static_cast<int>(s));
    }
    /// Series `s` is now `value`.
    void set(std::int64_t t_ns, Series s, std::int64_t value);
    void mark(std::int64_t t_ns, MarkerKind kind, std::int64_t bytes);

    std::int64_t current(Series s) const { return current_[static_cast<int>(s)]; }
    std::size_t capacity() const { return capacity_; }
    std::size_t size() const { return buckets_.size(); }
    SeriesData data() const;

private:
    /// Series `s` changed (current_ holds its new value).
    __attribute__((always_inline)) void record(std::int64_t t_ns, int s) {
        t_ns = std::max(t_ns, last_t_ns_);
        last_t_ns_ = t_ns;
        ++changes_;
        const std::int64_t v = current_[s];
        // Only series s changed, so only its peak can have moved.
        if (s == static_cast<int>(Series::allocated) && v > peak_allocated_) {
            peak_allocated_ = v;
            peak_allocated_t_ns_ = t_ns;
            reserved_at_peak_allocated_ = current_[static_cast<int>(Series::reserved)];
        } else if (s == static_cast<int>(Series::reserved) && v > peak_reserved_) {
            peak_reserved_ = v;
            peak_reserved_t_ns_ = t_ns;
        }
        if (!buckets_.empty()) {
            SeriesBucket& b = buckets_.back();
            if (t_ns == b.t0_ns || t_ns - b.t0_ns < bucket_ns_) {
                // Same instant, or inside the current bucket's width: widen the last bucket. Its
                // `last` equals current_ but for series s (every change ends here or in a new
                // bucket), and its min and max already hold `last`: only series s needs updating.
                b.t1_ns = t_ns;
                b.min[s] = std::min(b.min[s], v);
                b.max[s] = std::max(b.max[s], v);
                b.last[s] = v;
                return;
            }
        }
        open_bucket(t_ns);
    }
    /// A new bucket holding the present values from `t_ns` (merging pairs when full).
    void open_bucket(std::int64_t t_ns);
    void compact();

    std::size_t capacity_;
    std::vector<SeriesBucket> buckets_;
    std::array<std::int64_t, kSeriesCount> current_{};
    std::int64_t bucket_ns_ = 0;
    std::int64_t last_t_ns_ = 0;
    std::uint64_t changes_ = 0;
    std::int64_t peak_allocated_ = 0;
    std::int64_t peak_allocated_t_ns_ = -1;
    std::int64_t reserved_at_peak_allocated_ = 0;
    std::int64_t peak_reserved_ = 0;
    std::int64_t peak_reserved_t_ns_ = -1;
    std::vector<SeriesMarker> markers_;
    std::uint64_t markers_dropped_ = 0;
};

} // namespace gpumemprof::stats
