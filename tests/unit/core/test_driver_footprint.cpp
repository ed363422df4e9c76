// SPDX-License-Identifier: MIT
// core/driver_footprint: a handle is measured the first time only (also when threads race for it),
// a name makes a lookup key of its own, a context's end makes every handle new again, and the
// bytes a cause holds move either way and never read below 0.
#include "core/driver_footprint.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace gpumemprof::core;

TEST_CASE("driver footprint: each handle is new once, also when threads race for it") {
    DriverFootprint f;
    CHECK(f.first_use(0x1000));
    CHECK_FALSE(f.first_use(0x1000));
    CHECK(f.first_use(0x1000 | 1)); // a tagged key (a graph's first run) is a handle of its own
    CHECK(f.first_use(0));          // key 0 is a key like the others
    CHECK_FALSE(f.first_use(0));

    std::atomic<int> won{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([&] {
            for (std::uintptr_t k = 1; k <= 2000; ++k)
                won += f.first_use(0x10000 + 16 * k) ? 1 : 0;
        });
    for (auto& t : ts)
        t.join();
    CHECK(won.load() == 2000);
}

TEST_CASE("driver footprint: a lookup's key is the handle and the name") {
    DriverFootprint f;
    CHECK(f.first_use(0x2000, "relu_kernel"));
    CHECK_FALSE(f.first_use(0x2000, "relu_kernel"));
    CHECK(f.first_use(0x2000, "gelu_kernel"));
    CHECK(f.first_use(0x3000, "relu_kernel"));
}

TEST_CASE("driver footprint: a context's end makes every handle new again") {
    DriverFootprint f;
    REQUIRE(f.first_use(0x4000));
    f.forget_handles();
    CHECK(f.first_use(0x4000));
    CHECK_FALSE(f.first_use(0x4000));
}

TEST_CASE("driver footprint: a full set measures nothing more rather than loop") {
    DriverFootprint f;
    int fresh = 0;
    for (std::uintptr_t k = 1; k <= DriverFootprint::kSlots + 100; ++k)
        fresh += f.first_use(k * 64) ? 1 : 0;
    CHECK(fresh <= static_cast<int>(DriverFootprint::kSlots));
    CHECK(fresh > static_cast<int>(DriverFootprint::kSlots) * 3 / 4);
}

TEST_CASE("driver footprint: bytes by device and cause, either way, never below 0") {
    DriverFootprint f;
    f.add(0, FootprintCause::code, 6 << 20);
    f.add(0, FootprintCause::code, -2 << 20);
    f.add(1, FootprintCause::graphs, 2 << 20);
    f.add(0, FootprintCause::limits, -8 << 20); // a limit lowered below what was measured
    CHECK(f.bytes(0, FootprintCause::code) == 4 << 20);
    CHECK(f.bytes(1, FootprintCause::graphs) == 2 << 20);
    CHECK(f.bytes(0, FootprintCause::graphs) == 0);
    CHECK(f.bytes(0, FootprintCause::limits) == 0);
    CHECK(f.bytes(-1, FootprintCause::code) == 0);
    CHECK(f.bytes(DriverFootprint::kMaxDevices, FootprintCause::code) == 0);
    f.clear_device(0);
    CHECK(f.bytes(0, FootprintCause::code) == 0);
    CHECK(f.bytes(1, FootprintCause::graphs) == 2 << 20);
    CHECK(f.measured_calls() == 4);
    REQUIRE(f.first_use(0x7000));
    f.clear(); // a fork child's start: no device's bytes, every handle new
    CHECK(f.bytes(1, FootprintCause::graphs) == 0);
    CHECK(f.first_use(0x7000));
    CHECK(std::string(footprint_bucket(FootprintCause::graphs)) ==
          "the driver: CUDA graphs (executables, memory nodes)");
}

TEST_CASE("driver footprint: a created context's bytes leave with its destroy, once") {
    DriverFootprint f;
    f.add(0, FootprintCause::contexts, 500 << 20); // as Profiler::context_created adds them
    REQUIRE(f.context_created(0xc0, 0, 500 << 20));
    f.add(1, FootprintCause::contexts, 300 << 20);
    REQUIRE(f.context_created(0xc1, 1, 300 << 20));
    f.add(0, FootprintCause::streams, 2 << 20);
    f.context_destroyed(0xc0);
    CHECK(f.bytes(0, FootprintCause::contexts) == 0);
    CHECK(f.bytes(0, FootprintCause::streams) == 2 << 20); // the primary context's, untouched
    CHECK(f.bytes(1, FootprintCause::contexts) == 300 << 20);
    f.context_destroyed(0xc0); // twice, or a handle never measured: nothing more
    f.context_destroyed(0xdead);
    CHECK(f.bytes(1, FootprintCause::contexts) == 300 << 20);
    f.add(1, FootprintCause::contexts, 100 << 20);
    REQUIRE(f.context_created(0xc2, 1, 100 << 20));
    f.clear_device(1); // device 1's primary context reset: the bucket went, so nothing is owed
    f.add(1, FootprintCause::contexts, 50 << 20);
    REQUIRE(f.context_created(0xc3, 1, 50 << 20));
    f.context_destroyed(0xc1);
    f.context_destroyed(0xc2);
    CHECK(f.bytes(1, FootprintCause::contexts) == 50 << 20);
    CHECK(f.measured_calls() == 5); // the additions; a destroy gives back, it measures nothing
}

TEST_CASE("driver footprint: contexts beyond the table are not remembered") {
    DriverFootprint f;
    int kept = 0;
    for (std::uintptr_t c = 1; c <= DriverFootprint::kMaxContexts + 10; ++c)
        kept += f.context_created(c * 16, 0, 1) ? 1 : 0;
    CHECK(kept == DriverFootprint::kMaxContexts);
    CHECK_FALSE(f.context_created(0, 0, 1)); // no handle
    f.context_destroyed(16);
    CHECK(f.context_created(0xfff0, 0, 1)); // a destroyed one's entry is free again
}
