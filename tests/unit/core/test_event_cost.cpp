// SPDX-License-Identifier: MIT
// core/event_cost: the time of PyTorch allocator events, whole and by part, in seconds; a
// handler's clock, which counts every event and times one in kOneIn per thread.
#include "core/event_cost.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

using namespace gpumemprof::core;
using gpumemprof::util::CycleClock;

namespace {

void spin_for(std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
    }
}

} // namespace

TEST_CASE("event_cost: each part gets the time since its start, the whole its own", "[event_cost]") {
    EventCost cost;
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); // the clock's calibration interval
    const std::uint64_t entered = CycleClock::now();
    cost.count();
    std::uint64_t t = CycleClock::now();
    spin_for(std::chrono::milliseconds(20));
    t = cost.add(EventCost::stacks, t);
    spin_for(std::chrono::milliseconds(10));
    t = cost.add(EventCost::kinds, t);
    spin_for(std::chrono::milliseconds(5));
    cost.add(EventCost::traits, t);
    cost.add(EventCost::whole, entered);
    cost.count();

    const auto s = cost.summary();
    CHECK(s.events == 2);
    CHECK(s.stacks_seconds >= 0.019);
    CHECK(s.stacks_seconds < 0.5);
    CHECK(s.kinds_seconds >= 0.009);
    CHECK(s.kinds_seconds < s.stacks_seconds);
    // A site's traits are a part of their own, not in the kinds (a report line's parts add up).
    CHECK(s.traits_seconds >= 0.004);
    CHECK(s.traits_seconds < s.kinds_seconds);
    CHECK(s.backward_seconds == 0);
    CHECK(s.mirror_seconds == 0);
    CHECK(s.seconds >= s.stacks_seconds + s.kinds_seconds + s.traits_seconds);

    cost.clear();
    const auto z = cost.summary();
    CHECK(z.events == 0);
    CHECK(z.seconds == 0);
    CHECK(z.stacks_seconds == 0);
}

TEST_CASE("event_cost: a thread's clock times one event in kOneIn, weighted, and counts them all", "[event_cost]") {
    static_assert(EventCost::kOneIn == 16);
    EventCost cost;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // A new thread: its count starts at 0, so its events 0 and 16 are timed. Events 0 and 16
    // spend 2 ms in the stacks part, event 1 (not timed) 20 ms: counted, it would add 320 ms.
    std::thread([&] {
        for (int i = 0; i < 32; ++i) {
            EventCost::Clock clock(cost);
            clock.mark();
            if (i == 0 || i == 16)
                spin_for(std::chrono::milliseconds(2));
            if (i == 1)
                spin_for(std::chrono::milliseconds(20));
            clock.lap(EventCost::stacks);
            clock.lap(EventCost::mirror);
            clock.done();
        }
    }).join();
    const auto s = cost.summary();
    CHECK(s.events == 32);
    CHECK(s.stacks_seconds >= 2 * 16 * 0.002 * 0.95); // two timed events, 16 times each
    CHECK(s.stacks_seconds < 0.25);                   // the untimed one is not in it
    CHECK(s.mirror_seconds < s.stacks_seconds);
    CHECK(s.seconds >= s.stacks_seconds + s.mirror_seconds);
}
