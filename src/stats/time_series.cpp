// SPDX-License-Identifier: MIT
#include "stats/time_series.hpp"

#include "util/swallowed.hpp"

#include <algorithm>

namespace gpumemprof::stats {

TimeSeries::TimeSeries(std::size_t capacity) : capacity_(std::max<std::size_t>(4, (capacity + 1) & ~std::size_t{1})) {
    // Sized once: a change never allocates (the pages become resident as buckets fill them).
    try {
        buckets_.reserve(capacity_);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

void TimeSeries::set(std::int64_t t_ns, Series s, std::int64_t value) {
    if (current_[static_cast<int>(s)] == value)
        return;
    current_[static_cast<int>(s)] = value;
    record(t_ns, static_cast<int>(s));
}

void TimeSeries::mark(std::int64_t t_ns, MarkerKind kind, std::int64_t bytes) {
    if (markers_.size() >= kMaxMarkers) {
        ++markers_dropped_;
        return;
    }
    markers_.push_back({kind, std::max(t_ns, last_t_ns_), bytes});
}

void TimeSeries::open_bucket(std::int64_t t_ns) {
    SeriesBucket b;
    b.t0_ns = b.t1_ns = t_ns;
    b.min = b.max = b.last = current_;
    buckets_.push_back(b);
    if (buckets_.size() >= capacity_)
        compact();
}

void TimeSeries::compact() {
    // Merge pairs: (0,1), (2,3), ... Each bucket keeps the extremes of both halves.
    std::size_t out = 0;
    for (std::size_t i = 0; i + 1 < buckets_.size(); i += 2, ++out) {
        SeriesBucket m = buckets_[i];
        const SeriesBucket& b = buckets_[i + 1];
        m.t1_ns = b.t1_ns;
        for (int k = 0; k < kSeriesCount; ++k) {
            m.min[k] = std::min(m.min[k], b.min[k]);
            m.max[k] = std::max(m.max[k], b.max[k]);
        }
        m.last = b.last;
        buckets_[out] = m;
    }
    if (buckets_.size() % 2)
        buckets_[out++] = buckets_.back();
    buckets_.resize(out);
    // New changes share a bucket while they are closer than span / (capacity / 2), and at least
    // twice the former width: the remaining half then covers a stretch at least as long as the
    // run so far, so compactions get rarer as the run grows.
    const std::int64_t span = buckets_.back().t1_ns - buckets_.front().t0_ns;
    bucket_ns_ = std::max({bucket_ns_ * 2, span / static_cast<std::int64_t>(capacity_ / 2), std::int64_t{1}});
}

SeriesData TimeSeries::data() const {
    SeriesData d;
    d.buckets = buckets_;
    d.bucket_ns = bucket_ns_;
    d.changes = changes_;
    d.peak_allocated = peak_allocated_;
    d.peak_allocated_t_ns = peak_allocated_t_ns_;
    d.reserved_at_peak_allocated = reserved_at_peak_allocated_;
    d.peak_reserved = peak_reserved_;
    d.peak_reserved_t_ns = peak_reserved_t_ns_;
    d.markers = markers_;
    d.markers_dropped = markers_dropped_;
    return d;
}

} // namespace gpumemprof::stats
