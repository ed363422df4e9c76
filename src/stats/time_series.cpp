// SPDX-License-Identifier: MIT
#include "stats/time_series.hpp"

#include <algorithm>

namespace gpumemprof::stats {

TimeSeries::TimeSeries(std::size_t capacity) : capacity_(std::max<std::size_t>(4, (capacity + 1) & ~std::size_t{1})) {
    // Sized once: a change never allocates (the pages become resident as buckets fill them).
    try {
        buckets_.reserve(capacity_);
    } catch (...) {
    }
}

void TimeSeries::add(std::int64_t t_ns, Series s, std::int64_t delta) {
    current_[static_cast<int>(s)] += delta;
    record(t_ns, static_cast<int>(s));
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

void TimeSeries::record(std::int64_t t_ns, int s) {
    t_ns = std::max(t_ns, last_t_ns_);
    last_t_ns_ = t_ns;
    ++changes_;
    const std::int64_t v = current_[s];
    // Only series s changed, so only its peak can have moved.
    if (s == static_cast<int>(Series::allocated) && v > peak_allocated_) {
        peak_allocated_ = v;
        peak_allocated_t_ns_ = t_ns;
    } else if (s == static_cast<int>(Series::reserved) && v > peak_reserved_) {
        peak_reserved_ = v;
        peak_reserved_t_ns_ = t_ns;
    }
    if (!buckets_.empty() && (t_ns == buckets_.back().t0_ns || t_ns - buckets_.back().t0_ns < bucket_ns_)) {
        // Same instant, or inside the current bucket's width: widen the last bucket. Its `last`
        // equals current_ but for series s (every change ends here or in a new bucket), and its
        // min and max already hold `last`: only series s needs updating.
        SeriesBucket& b = buckets_.back();
        b.t1_ns = t_ns;
        b.min[s] = std::min(b.min[s], v);
        b.max[s] = std::max(b.max[s], v);
        b.last[s] = v;
        return;
    }
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
    d.peak_reserved = peak_reserved_;
    d.peak_reserved_t_ns = peak_reserved_t_ns_;
    d.markers = markers_;
    d.markers_dropped = markers_dropped_;
    return d;
}

} // namespace gpumemprof::stats
