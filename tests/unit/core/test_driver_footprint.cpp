// SPDX-License-Identifier: MIT
// core/driver_footprint: a handle is measured the first time only (also when threads race for it)
// and while that first time is under way, a name makes a lookup key of its own, a context's end
// makes every handle new again, and the bytes a cause holds move either way and never read below 0.
#include "core/driver_footprint.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace gpumemprof::core;

namespace {
/// Offers `key` and ends its first use at once, as a call that returned: whether it was the first.
bool first(DriverFootprint& f, std::uintptr_t key) {
    const HandleUse u = f.first_use(key);
    f.first_use_done(u);
    return u.first();
}
} // namespace

TEST_CASE("driver footprint: each handle is new once, also when threads race for it") {
    DriverFootprint f;
    CHECK(first(f, 0x1000));
    CHECK_FALSE(first(f, 0x1000));
    CHECK_FALSE(f.first_use(0x1000).measure);
    CHECK(first(f, 0x1000 | 1)); // a tagged key (a graph's first run) is a handle of its own
    CHECK(first(f, 0));          // key 0 is a key like the others
    CHECK_FALSE(first(f, 0));

    std::atomic<int> won{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([&] {
            for (std::uintptr_t k = 1; k <= 2000; ++k)
                won += first(f, 0x10000 + 16 * k) ? 1 : 0;
        });
    for (auto& t : ts)
        t.join();
    CHECK(won.load() == 2000);
}

TEST_CASE("driver footprint: calls of a handle while its first use is measured are measured too") {
    // Another thread's launch of the same kernel, between the first launch's offer and its
    // window, may be the call in which the driver loads it: unmeasured, its bytes stayed
    // unexplained (four threads' first matmuls on an H100).
    DriverFootprint f;
    const HandleUse a = f.first_use(0x5000);
    REQUIRE(a.first());
    CHECK(a.measure);
    const HandleUse b = f.first_use(0x5000);
    CHECK(b.measure);
    CHECK_FALSE(b.first());
    f.first_use_done(b); // not the first: changes nothing
    CHECK(f.first_use(0x5000).measure);
    f.first_use_done(a);
    CHECK_FALSE(f.first_use(0x5000).measure);
    CHECK_FALSE(f.first_use(0x5000).first());
    // A hash with the top bit set (a lookup's key) is a key like the others.
    const std::uintptr_t top = ~std::uintptr_t{0} - 0xff;
    const HandleUse h = f.first_use(top);
    REQUIRE(h.first());
    CHECK(f.first_use(top).measure);
    f.first_use_done(h);
    CHECK_FALSE(f.first_use(top).measure);
}

TEST_CASE("driver footprint: a lookup's key is the handle and the name") {
    DriverFootprint f;
    CHECK(f.first_use(0x2000, "relu_kernel").first());
    CHECK(f.first_use(0x2000, "relu_kernel").measure); // the first not ended yet
    f.first_use_done(f.first_use(0x2000, "gelu_kernel"));
    CHECK_FALSE(f.first_use(0x2000, "gelu_kernel").measure);
    CHECK(f.first_use(0x3000, "relu_kernel").first());
}

TEST_CASE("driver footprint: a context's end makes every handle new again") {
    DriverFootprint f;
    REQUIRE(first(f, 0x4000));
    f.forget_handles();
    CHECK(first(f, 0x4000));
    CHECK_FALSE(first(f, 0x4000));
    // A first use under way when its context ends: its end does not mark the handle seen.
    const HandleUse u = f.first_use(0x6000);
    REQUIRE(u.first());
    f.forget_handles();
    f.first_use_done(u);
    CHECK(f.first_use(0x6000).first());
}

TEST_CASE("driver footprint: a full set measures nothing more rather than loop") {
    DriverFootprint f;
    int fresh = 0;
    for (std::uintptr_t k = 1; k <= DriverFootprint::kSlots + 100; ++k)
        fresh += first(f, k * 64) ? 1 : 0;
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
    REQUIRE(first(f, 0x7000));
    f.clear(); // a fork child's start: no device's bytes, every handle new
    CHECK(f.bytes(1, FootprintCause::graphs) == 0);
    CHECK(first(f, 0x7000));
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
