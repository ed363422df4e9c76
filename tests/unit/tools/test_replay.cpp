// SPDX-License-Identifier: MIT
// Replay of traces written here: contexts of a device replay to pools of their own, private pool
// ids to private pools, and the figures are the library's, worked out by hand.
#include "tools/replay.hpp"
#include "trace/writer.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gpumemprof;
using namespace gpumemprof::tools;
using trace::EventType;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

std::string temp_path(const char* tag) {
    return "/tmp/gpumemprof_test_replay_" + std::to_string(::getpid()) + "_" + tag + ".gmt";
}

trace::Event ev(EventType type, std::uint64_t ptr, std::uint64_t size, std::uint64_t context = 0,
                trace::PoolId pool = trace::kDefaultPool) {
    trace::Event e;
    e.type = type;
    e.ptr = ptr;
    e.size = size;
    e.block_size = size;
    e.context = context;
    e.pool_id = pool;
    e.time_ns = 1;
    return e;
}

void write_trace(const std::string& path, const std::vector<trace::Event>& events, std::uint32_t per_block = 4096) {
    trace::Header h;
    h.devices = {{0, 80ull << 30}};
    trace::Writer w;
    REQUIRE(w.open(path, h, trace::WriterOptions{per_block, false}));
    for (const auto& e : events)
        w.record(e);
    w.close();
}

std::vector<DeviceResult> replay_file(const std::string& path, Plan* plan, const char* conf = "") {
    std::string error, warning;
    REQUIRE(load_plan(path, false, plan, &error, &warning));
    ReplayOptions o;
    o.conf = pool::parse_alloc_conf(conf, nullptr);
    return replay(*plan, o);
}

} // namespace

TEST_CASE("two contexts of a device replay to pools of their own, as the library reserved", "[tools]") {
    // The library: context 0 takes a 30 MiB segment for 30 MiB and frees it (cached in its
    // pool); context 1 then asks 22 MiB, which context 0's cached block cannot serve: its own pool
    // gets a 22 MiB segment. Reserved on the device: 30 + 22 = 52 MiB. One pool for both would
    // have split the cached 30 MiB block and reserved 30 MiB.
    const auto path = temp_path("ctx");
    const std::uint64_t a = 0x7f0000000000, b = a + 30 * MiB;
    write_trace(path, {ev(EventType::segment_alloc, a, 30 * MiB, 0), ev(EventType::alloc, a, 30 * MiB, 0),
                       ev(EventType::free_requested, a, 30 * MiB, 0), ev(EventType::segment_alloc, b, 22 * MiB, 1),
                       ev(EventType::alloc, b, 22 * MiB, 1)});
    Plan plan;
    const auto results = replay_file(path, &plan);
    REQUIRE(plan.devices.size() == 2);
    CHECK(plan.devices[0].ordinal == 0);
    CHECK(plan.devices[0].context == 0);
    CHECK(plan.devices[1].context == 1);
    CHECK(plan.devices[0].recorded.reserved_peak == static_cast<std::int64_t>(30 * MiB));
    CHECK(plan.devices[1].recorded.reserved_peak == static_cast<std::int64_t>(22 * MiB));
    REQUIRE(results.size() == 2);
    CHECK(results[0].context == 0);
    CHECK(results[1].context == 1);
    CHECK(results[0].stats.reserved_bytes[stats::kAll].peak == static_cast<std::int64_t>(30 * MiB));
    CHECK(results[1].stats.reserved_bytes[stats::kAll].peak == static_cast<std::int64_t>(22 * MiB));
    CHECK(results[1].stats.num_device_alloc == 1);
    CHECK(totals(results).reserved_peak == static_cast<std::int64_t>(52 * MiB));
    CHECK(results[0].stats.allocated_bytes[stats::kAll].current == 0);
    CHECK(results[1].stats.allocated_bytes[stats::kAll].current == static_cast<std::int64_t>(22 * MiB));
    std::remove(path.c_str());
}

TEST_CASE("a private pool id replays to a private pool: no reuse from or by the default pool", "[tools]") {
    // A CUDA graph's pool (1, 0) takes a 20 MiB segment for 4 MiB and frees it; a default 4 MiB
    // request then needs a segment of its own (20 MiB more), and the graph's next request finds
    // its cached block again. Reserved: 40 MiB (one pool for all: 20 MiB).
    const auto path = temp_path("priv");
    const std::uint64_t g = 0x7f0000000000, d = g + 20 * MiB;
    write_trace(path,
                {ev(EventType::alloc, g, 4 * MiB, 0, {1, 0}), ev(EventType::free_requested, g, 4 * MiB, 0, {1, 0}),
                 ev(EventType::alloc, d, 4 * MiB), ev(EventType::alloc, g, 4 * MiB, 0, {1, 0})});
    Plan plan;
    const auto results = replay_file(path, &plan);
    REQUIRE(results.size() == 1);
    const auto& s = results[0].stats;
    CHECK(s.reserved_bytes[stats::kAll].peak == static_cast<std::int64_t>(40 * MiB));
    CHECK(s.num_device_alloc == 2);
    CHECK(s.allocated_bytes[stats::kAll].current == static_cast<std::int64_t>(8 * MiB));
    std::remove(path.c_str());
}

TEST_CASE("replay streams: blocks of one event replay to the same figures as one block", "[tools]") {
    // The same requests written one event per block and 4096 per block: the streamed reading
    // crosses a block at every event and must not change a figure. Sizes: 1000 B (small pool,
    // 512-rounded to 1024), 3 MiB and 12 MiB (large), freed in between.
    const auto size_of = [](int i) { return i % 3 == 0 ? 1000 : i % 3 == 1 ? 3 * MiB : 12 * MiB; };
    const std::uint64_t base = 0x7f0000000000;
    std::vector<trace::Event> evs;
    for (int i = 0; i < 300; ++i) {
        evs.push_back(ev(EventType::alloc, base + i * 64 * MiB, size_of(i)));
        if (i % 2 == 1) // the block before goes
            evs.push_back(ev(EventType::free_requested, base + (i - 1) * 64 * MiB, size_of(i - 1)));
    }
    const auto one = temp_path("one");
    const auto many = temp_path("many");
    write_trace(one, evs, 1);
    write_trace(many, evs, 4096);
    Plan pa, pb;
    const auto ra = replay_file(one, &pa);
    const auto rb = replay_file(many, &pb);
    REQUIRE(ra.size() == 1);
    REQUIRE(rb.size() == 1);
    CHECK(pa.events == evs.size());
    CHECK(ra[0].allocs == 300);
    CHECK(ra[0].stats.reserved_bytes[stats::kAll].peak == rb[0].stats.reserved_bytes[stats::kAll].peak);
    CHECK(ra[0].stats.allocated_bytes[stats::kAll].current == rb[0].stats.allocated_bytes[stats::kAll].current);
    // The 150 odd i stay live: 50 of each size, 1024 + 3 MiB + 12 MiB a trio.
    CHECK(ra[0].stats.allocated_bytes[stats::kAll].current ==
          static_cast<std::int64_t>(50 * (1024 + 3 * MiB + 12 * MiB)));
    std::remove(one.c_str());
    std::remove(many.c_str());
}
