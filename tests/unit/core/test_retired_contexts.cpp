// SPDX-License-Identifier: MIT
// core/retired_contexts: destroyed contexts folded into one entry per device, counts summed and
// peaks the largest of any one, by hand.
#include "core/retired_contexts.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof;
using core::RetiredContexts;

namespace {
report::DeviceSummary dead_context(int device, int number, std::int64_t peak_bytes, std::int64_t reserved_peak) {
    report::DeviceSummary d;
    d.device = device;
    d.context = number;
    d.total_capacity = 1 << 30;
    d.stats.max_split_size = -1;
    auto& a = d.stats.allocated_bytes[stats::kAll];
    a.peak = peak_bytes;
    a.allocated = peak_bytes * 2;
    a.freed = peak_bytes * 2;
    d.stats.allocation[stats::kAll] = {0, 2, 3, 3};
    d.stats.num_device_alloc = 1;
    d.invalid_frees = 1;
    d.pool_counters.misses = 2;
    d.pool_counters.driver_errors[700] = 1;
    d.at_reserved_peak = {reserved_peak, peak_bytes, reserved_peak - peak_bytes};
    return d;
}
} // namespace

TEST_CASE("retired contexts: sums of counts, the largest peak, per device", "[retired]") {
    RetiredContexts r;
    r.fold(dead_context(0, 3, 4096, 2 << 20));
    r.fold(dead_context(0, 5, 1024, 20 << 20));
    r.fold(dead_context(1, 4, 512, 2 << 20));
    REQUIRE(r.entries().size() == 2);
    const report::DeviceSummary& d0 = r.entries().at(0);
    CHECK(d0.folded_contexts == 2);
    CHECK(d0.context == 5); // the newest of them
    CHECK_FALSE(d0.context_alive);
    CHECK(d0.total_capacity == std::size_t{1} << 30);
    CHECK(d0.stats.max_split_size == -1);
    CHECK(d0.stats.allocated_bytes[stats::kAll] == stats::Stat{0, 4096, 2 * 4096 + 2 * 1024, 2 * 4096 + 2 * 1024});
    CHECK(d0.stats.allocation[stats::kAll] == stats::Stat{0, 2, 6, 6});
    CHECK(d0.stats.num_device_alloc == 2);
    CHECK(d0.invalid_frees == 2);
    CHECK(d0.pool_counters.misses == 4);
    CHECK(d0.pool_counters.driver_errors.at(700) == 2);
    // Fragmentation at the highest reserved peak: the second context's.
    CHECK(d0.at_reserved_peak.reserved == 20 << 20);
    CHECK(d0.at_reserved_peak.allocated == 1024);
    CHECK_FALSE(d0.has_model);
    const report::DeviceSummary& d1 = r.entries().at(1);
    CHECK(d1.folded_contexts == 1);
    CHECK(d1.stats.allocated_bytes[stats::kAll].peak == 512);
    r.clear();
    CHECK(r.entries().empty());
}
