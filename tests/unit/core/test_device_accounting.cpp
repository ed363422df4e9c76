// SPDX-License-Identifier: MIT
// core/device_accounting: when a reading is due (the accounted total moved by the step, up or
// down), the history the stacked view draws (the exit reading last), the peak, and the splits
// kept at OOMs.
#include "core/device_accounting.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof;
using namespace gpumemprof::core;

namespace {

constexpr std::int64_t MiB = 1 << 20;

AccountingReading reading(std::int64_t t, std::int64_t used, std::int64_t allocated, std::int64_t cached) {
    AccountingReading r;
    r.t_ns = t;
    r.driver_used = used;
    r.driver_total = 1024 * MiB;
    r.buckets = {{"allocated", allocated}, {"cached, free", cached}};
    r.pool_sites = {{7, allocated}};
    return r;
}

/// A reading of device 0 whose buckets are all that was checked before it was taken.
void add(DeviceAccounting& a, std::int64_t t, std::int64_t used, std::int64_t allocated, std::int64_t cached) {
    a.add(0, reading(t, used, allocated, cached), allocated + cached);
}

} // namespace

TEST_CASE("device accounting: a reading is due when the accounted total moved by 4 MiB or 1%, either way") {
    DeviceAccounting a;
    CHECK(a.due(0, 0)); // no reading yet
    add(a, 1, 20 * MiB, 0, 20 * MiB);
    CHECK_FALSE(a.due(0, 23 * MiB)); // +3 MiB
    CHECK(a.due(0, 24 * MiB));       // +4 MiB
    CHECK_FALSE(a.due(0, 17 * MiB)); // -3 MiB
    CHECK(a.due(0, 16 * MiB));       // -4 MiB: memory given back is a reading too
    add(a, 2, 1000 * MiB, 1000 * MiB, 0);
    CHECK_FALSE(a.due(0, 1009 * MiB)); // 1% of 1000 MiB is 10 MiB
    CHECK(a.due(0, 990 * MiB));
}

TEST_CASE("device accounting: the next reading is due from the total that was checked, not the driver's buckets") {
    // A stream-ordered pool keeps 600 MiB reserved: read with the driver's figure, that bucket
    // is in the reading but not in the total the calls check (its figure costs a driver call).
    DeviceAccounting a;
    AccountingReading r = reading(1, 640 * MiB, 40 * MiB, 0);
    r.buckets.emplace_back("stream-ordered memory pools: reserved, free", 600 * MiB);
    a.add(0, r, 40 * MiB);
    CHECK_FALSE(a.due(0, 40 * MiB + 64 * 1024)); // a 64 KiB block from the pool's reserve
    CHECK_FALSE(a.due(0, 40 * MiB - 64 * 1024));
    CHECK(a.due(0, 44 * MiB));
    CHECK(a.snapshot().at(0).history.back().accounted() == 640 * MiB); // the reading keeps every bucket
}

TEST_CASE("device accounting: the history in time order, the exit reading last, the peak the largest used") {
    DeviceAccounting a;
    a.set_baseline(0, 300 * MiB);
    add(a, 10, 320 * MiB, 0, 20 * MiB);
    add(a, 20, 362 * MiB, 18 * MiB, 44 * MiB);
    add(a, 30, 320 * MiB, 10 * MiB, 10 * MiB);
    a.set_exit(0, reading(40, 310 * MiB, 0, 10 * MiB));
    a.set_exit(0, reading(41, 300 * MiB, 0, 0)); // a second exit reading replaces the first
    const DeviceAccounting::Device d = a.snapshot().at(0);
    REQUIRE(d.history.size() == 4);
    CHECK(d.history[0].t_ns == 10);
    CHECK(d.history[1].driver_used == 362 * MiB);
    CHECK(d.history[3].t_ns == 41);
    CHECK(d.history[3].driver_used == 300 * MiB);
    CHECK(d.history[1].pool_sites.empty()); // the history keeps the buckets only
    CHECK(d.peak.t_ns == 20);
    CHECK(d.peak.pool_sites.size() == 1); // the peak's reading keeps its sites
    CHECK(d.readings == 3);
    CHECK(d.exit.t_ns == 41);
}

TEST_CASE("device accounting: a long run's history stays bounded") {
    DeviceAccounting a;
    for (int i = 0; i < 5000; ++i)
        add(a, i, i * MiB, i * MiB, 0);
    a.set_exit(0, reading(99999, 0, 0, 0));
    const DeviceAccounting::Device d = a.snapshot().at(0);
    CHECK(d.history.size() <= DeviceAccounting::kMaxHistory + 1);
    CHECK(d.history.front().t_ns == 0);
    CHECK(d.history.back().t_ns == 99999);
    CHECK(d.peak.t_ns == 4999);
}

TEST_CASE("device accounting: the splits at OOMs, the first kMaxOomSplits kept") {
    DeviceAccounting a;
    for (std::uint64_t i = 1; i <= DeviceAccounting::kMaxOomSplits + 5; ++i) {
        report::OomSplit s;
        s.oom = i;
        s.device = 1;
        s.has_accounting = true;
        s.accounting = reading(static_cast<std::int64_t>(i), 64 * MiB, 48 * MiB, 14 * MiB);
        a.add_oom(std::move(s));
    }
    const auto splits = a.oom_splits();
    REQUIRE(splits.size() == DeviceAccounting::kMaxOomSplits);
    CHECK(splits.front().oom == 1);
    CHECK(splits.back().oom == DeviceAccounting::kMaxOomSplits);
    CHECK(splits.front().accounting.unexplained() == 2 * MiB); // 64 - 48 - 14
}
