// SPDX-License-Identifier: MIT
// The per-device memory time series: exact until full, then bucketed with every peak kept; the
// event ring keeps the latest events in order.
#include "stats/event_ring.hpp"
#include "stats/time_series.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <random>

using namespace gpumemprof::stats;

namespace {
constexpr int kA = static_cast<int>(Series::allocated);
constexpr int kR = static_cast<int>(Series::reserved);
} // namespace

TEST_CASE("time series: every change is exact until the capacity") {
    TimeSeries ts(8);
    ts.add(10, Series::reserved, 2048);
    ts.add(10, Series::allocated, 512); // same instant: one point
    ts.add(20, Series::allocated, 1024);
    ts.add(35, Series::allocated, -512);
    ts.set(40, Series::model_reserved, 4096);
    ts.set(41, Series::model_reserved, 4096); // no change, no point
    SeriesData d = ts.data();
    REQUIRE(d.buckets.size() == 4);
    CHECK(d.bucket_ns == 0);
    CHECK(d.changes == 5);
    CHECK(d.buckets[0].t0_ns == 10);
    CHECK(d.buckets[0].last[kA] == 512);
    CHECK(d.buckets[0].min[kA] == 0); // the reserved change came first, at allocated 0
    CHECK(d.buckets[0].last[kR] == 2048);
    CHECK(d.buckets[1].t0_ns == 20);
    CHECK(d.buckets[1].min[kA] == 1536);
    CHECK(d.buckets[1].max[kA] == 1536);
    CHECK(d.buckets[2].last[kA] == 1024);
    CHECK(d.buckets[3].last[static_cast<int>(Series::model_reserved)] == 4096);
    CHECK(d.peak_allocated == 1536);
    CHECK(d.peak_allocated_t_ns == 20);
    CHECK(d.peak_reserved == 2048);
    CHECK(d.peak_reserved_t_ns == 10);
}

TEST_CASE("time series: merging keeps the peak, its exact time and a bounded size") {
    TimeSeries ts(16);
    // A sawtooth 0..9 MiB repeated, with one spike of 100 MiB at t = 5003.
    const std::int64_t mib = 1 << 20;
    std::int64_t value = 0;
    for (std::int64_t t = 1; t <= 10000; ++t) {
        std::int64_t next = (t % 10) * mib;
        if (t == 5003)
            next = 100 * mib;
        ts.add(t, Series::allocated, next - value);
        value = next;
        REQUIRE(ts.size() < 16);
    }
    SeriesData d = ts.data();
    CHECK(d.changes == 10000);
    CHECK(d.peak_allocated == 100 * mib);
    CHECK(d.peak_allocated_t_ns == 5003);
    std::int64_t maxmax = 0;
    const SeriesBucket* spike = nullptr;
    for (const SeriesBucket& b : d.buckets) {
        if (b.max[kA] > maxmax) {
            maxmax = b.max[kA];
            spike = &b;
        }
    }
    CHECK(maxmax == 100 * mib);
    REQUIRE(spike != nullptr);
    CHECK(spike->t0_ns <= 5003);
    CHECK(spike->t1_ns >= 5003);
    // The sawtooth's floor is kept as well: some bucket still reaches 0.
    CHECK(std::any_of(d.buckets.begin(), d.buckets.end(), [](const SeriesBucket& b) { return b.min[kA] == 0; }));
    CHECK(d.buckets.back().last[kA] == 0); // t = 10000: 10000 % 10 == 0
    CHECK(d.buckets.back().t1_ns == 10000);
    CHECK(d.buckets.front().t0_ns == 1);
    CHECK(d.bucket_ns > 0);
}

TEST_CASE("time series: each bucket's range holds exactly the values recorded in it (random walk)") {
    // All four series move, several at the same instant (as a free moves bytes from allocated to
    // waiting), one at a time otherwise; the model's series is set, not added to.
    std::mt19937_64 rng(7);
    TimeSeries ts(64);
    struct Change {
        std::int64_t t;
        std::array<std::int64_t, kSeriesCount> values; // every series after the change
    };
    std::vector<Change> truth;
    std::array<std::int64_t, kSeriesCount> value{};
    std::int64_t t = 0;
    for (int i = 0; i < 200000; ++i) {
        if (rng() % 3 != 0)
            t += static_cast<std::int64_t>(rng() % 1000);
        const int s = static_cast<int>(rng() % kSeriesCount);
        std::int64_t delta = static_cast<std::int64_t>(rng() % 4096) - (value[s] > 0 ? 2048 : 0);
        if (value[s] + delta < 0)
            delta = -value[s];
        if (delta == 0)
            continue; // set() records no change when the value stays
        value[s] += delta;
        if (s == static_cast<int>(Series::model_reserved))
            ts.set(t, Series::model_reserved, value[s]);
        else
            ts.add(t, static_cast<Series>(s), delta);
        truth.push_back({t, value});
    }
    SeriesData d = ts.data();
    REQUIRE(d.buckets.size() < 64);
    CHECK(d.changes == truth.size());
    // Buckets are in time order, do not overlap and together hold every change.
    std::size_t k = 0;
    for (std::size_t b = 0; b < d.buckets.size(); ++b) {
        const SeriesBucket& bk = d.buckets[b];
        REQUIRE(bk.t0_ns <= bk.t1_ns);
        if (b)
            REQUIRE(d.buckets[b - 1].t1_ns < bk.t0_ns);
        std::array<std::int64_t, kSeriesCount> lo, hi, last{};
        lo.fill(INT64_MAX);
        hi.fill(INT64_MIN);
        for (; k < truth.size() && truth[k].t <= bk.t1_ns; ++k) {
            for (int s = 0; s < kSeriesCount; ++s) {
                lo[s] = std::min(lo[s], truth[k].values[s]);
                hi[s] = std::max(hi[s], truth[k].values[s]);
            }
            last = truth[k].values;
        }
        for (int s = 0; s < kSeriesCount; ++s) {
            INFO("bucket " << b << " series " << kSeriesNames[s]);
            CHECK(bk.min[s] == lo[s]);
            CHECK(bk.max[s] == hi[s]);
            CHECK(bk.last[s] == last[s]);
        }
    }
    CHECK(k == truth.size());
    for (int s : {kA, kR}) {
        auto peak = std::max_element(truth.begin(), truth.end(),
                                     [s](const Change& a, const Change& b) { return a.values[s] < b.values[s]; });
        CHECK((s == kA ? d.peak_allocated : d.peak_reserved) == peak->values[s]);
        CHECK((s == kA ? d.peak_allocated_t_ns : d.peak_reserved_t_ns) == peak->t);
    }
}

TEST_CASE("time series: markers are kept in order and bounded") {
    TimeSeries ts(8);
    ts.add(5, Series::allocated, 1);
    ts.mark(7, MarkerKind::oom, 1 << 30);
    ts.mark(3, MarkerKind::empty_cache, 4096); // earlier than the latest change: moved to it
    SeriesData d = ts.data();
    REQUIRE(d.markers.size() == 2);
    CHECK(d.markers[0].kind == MarkerKind::oom);
    CHECK(d.markers[0].t_ns == 7);
    CHECK(d.markers[0].bytes == (1 << 30));
    CHECK(d.markers[1].t_ns == 5);
    for (std::size_t i = 0; i < TimeSeries::kMaxMarkers + 10; ++i)
        ts.mark(10, MarkerKind::oom, 1);
    d = ts.data();
    CHECK(d.markers.size() == TimeSeries::kMaxMarkers);
    CHECK(d.markers_dropped == 12);
}

TEST_CASE("event ring: the latest events, oldest first, overwritten ones counted") {
    EventRing ring(4);
    for (int i = 1; i <= 6; ++i) {
        PoolEvent e;
        e.t_ns = i;
        e.size = static_cast<std::uint64_t>(i) * 512;
        ring.push(e);
    }
    auto ev = ring.events();
    REQUIRE(ev.size() == 4);
    CHECK(ev[0].t_ns == 3);
    CHECK(ev[3].t_ns == 6);
    CHECK(ev[3].size == 3072);
    CHECK(ring.overwritten() == 2);
    EventRing full(4); // exactly full, nothing overwritten yet
    for (int i = 1; i <= 4; ++i) {
        PoolEvent e;
        e.t_ns = i;
        full.push(e);
    }
    REQUIRE(full.events().size() == 4);
    CHECK(full.events().front().t_ns == 1);
    CHECK(full.overwritten() == 0);
    EventRing off(0);
    off.push(PoolEvent{});
    CHECK(off.events().empty());
}
