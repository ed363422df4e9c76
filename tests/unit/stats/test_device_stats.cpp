// SPDX-License-Identifier: MIT
// DeviceStats: c10 Stat arithmetic, resets, the 122 flat keys of torch.cuda.memory_stats(), JSON.
#include "stats/device_stats.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace gpumemprof::stats;

TEST_CASE("Stat increase/decrease follow c10::Stat", "[stats]") {
    Stat s;
    s.increase(5); // current 5, peak 5, allocated 5
    s.decrease(3); // current 2, freed 3, peak stays 5
    s.increase(1); // current 3, allocated 6, peak still 5
    CHECK(s.current == 3);
    CHECK(s.peak == 5);
    CHECK(s.allocated == 6);
    CHECK(s.freed == 3);
    s.increase(4); // current 7 > 5: new peak
    CHECK(s.peak == 7);
    s.reset_peak();
    s.decrease(7);
    CHECK(s.peak == 7); // reset_peak set peak = current (7); decrease never lowers it
    CHECK(s.current == 0);
    s.reset_accumulated();
    CHECK(s.allocated == 0);
    CHECK(s.freed == 0);
    CHECK(s.peak == 7);
}

TEST_CASE("DeviceStats resets touch exactly what resetPeakStats/resetAccumulatedStats touch", "[stats]") {
    DeviceStats d;
    d.max_split_size = 128 << 20;
    d.allocated_bytes[kLargePool].increase(100);
    d.allocated_bytes[kLargePool].decrease(60); // current 40, peak 100, allocated 100, freed 60
    d.oversize_segments.increase(2);
    d.oversize_segments.decrease(1); // current 1, peak 2
    d.num_alloc_retries = 3;
    d.num_ooms = 1;
    d.num_sync_all_streams = 4;
    d.num_device_alloc = 9;
    d.num_device_free = 8;

    DeviceStats p = d;
    p.reset_peak();
    CHECK(p.allocated_bytes[kLargePool].peak == 40);
    CHECK(p.oversize_segments.peak == 1);
    CHECK(p.allocated_bytes[kLargePool].allocated == 100);
    CHECK(p.num_device_alloc == 9);

    DeviceStats a = d;
    a.reset_accumulated();
    CHECK(a.allocated_bytes[kLargePool].allocated == 0);
    CHECK(a.allocated_bytes[kLargePool].freed == 0);
    CHECK(a.allocated_bytes[kLargePool].current == 40);
    CHECK(a.allocated_bytes[kLargePool].peak == 100);
    CHECK(a.oversize_segments.allocated == 0);
    CHECK(a.num_alloc_retries == 0);
    CHECK(a.num_ooms == 0);
    CHECK(a.num_sync_all_streams == 0);
    CHECK(a.num_device_alloc == 0);
    CHECK(a.num_device_free == 0);
    CHECK(a.max_split_size == 128 << 20); // a configuration value, not a counter
}

TEST_CASE("flatten gives the 122 sorted keys of torch.cuda.memory_stats()", "[stats]") {
    DeviceStats d;
    d.allocation[kSmallPool].increase(7);
    d.reserved_bytes[kAll].increase(2097152);
    d.oversize_allocations.increase(1);
    d.num_ooms = 2;
    const auto flat = flatten(d);
    // 9 arrays x 3 pools x 4 fields = 108, + 2 single stats x 4 = 8, + 6 scalars = 122.
    REQUIRE(flat.size() == 122);
    CHECK(std::is_sorted(flat.begin(), flat.end(), [](const auto& x, const auto& y) { return x.first < y.first; }));
    // '.' sorts before '_', so "active.*" precede "active_bytes.*".
    CHECK(flat.front().first == "active.all.allocated");
    CHECK(flat.back().first == "segment.small_pool.peak");

    std::map<std::string, std::int64_t> m(flat.begin(), flat.end());
    REQUIRE(m.size() == 122); // no duplicate keys
    CHECK(m.at("allocation.small_pool.current") == 7);
    CHECK(m.at("allocation.small_pool.peak") == 7);
    CHECK(m.at("allocation.large_pool.current") == 0);
    CHECK(m.at("reserved_bytes.all.allocated") == 2097152);
    CHECK(m.at("oversize_allocations.current") == 1);
    CHECK(m.at("num_ooms") == 2);
    CHECK(m.at("max_split_size") == -1); // unlimited reads -1, as torch
    for (const char* k :
         {"num_alloc_retries", "num_sync_all_streams", "num_device_alloc", "num_device_free", "oversize_segments.freed",
          "inactive_split_bytes.all.peak", "requested_bytes.large_pool.freed", "active_bytes.small_pool.current"})
        CHECK(m.count(k) == 1);
    CHECK(m.count("allocated.all.current") == 0); // the docstring's misspelt key does not exist
}

TEST_CASE("to_json renders the flat keys in order as one object", "[stats]") {
    DeviceStats d;
    d.num_device_alloc = 3;
    const std::string j = to_json(d);
    CHECK(j.rfind("{\"active.all.allocated\":0,", 0) == 0);
    CHECK(j.find("\"max_split_size\":-1") != std::string::npos);
    CHECK(j.find("\"num_device_alloc\":3") != std::string::npos);
    CHECK(j.back() == '}');
    CHECK(std::count(j.begin(), j.end(), ':') == 122);
}
