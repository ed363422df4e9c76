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
    const CycleClock rate;
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); // the clocks' calibration interval
    // Each part's start lies its own time in the past (no spinning: a busy machine's preemption
    // would add to a part): stacks 20 ms, kinds 10, traits 5, the whole 40.
    const auto ago = [&](double ms) {
        return CycleClock::now() - static_cast<std::uint64_t>(ms * 1e6 / rate.ns_per_tick());
    };
    cost.count();
    cost.add(EventCost::stacks, ago(20));
    cost.add(EventCost::kinds, ago(10));
    cost.add(EventCost::traits, ago(5));
    cost.add(EventCost::whole, ago(40));
    cost.count();

    const auto s = cost.summary();
    CHECK(s.events == 2);
    CHECK(s.stacks_seconds == Approx(0.020).epsilon(0.05));
    CHECK(s.kinds_seconds == Approx(0.010).epsilon(0.05));
    // A site's traits are a part of their own, not in the kinds (a report line's parts add up).
    CHECK(s.traits_seconds == Approx(0.005).epsilon(0.05));
    CHECK(s.backward_seconds == 0);
    CHECK(s.mirror_seconds == 0);
    CHECK(s.seconds == Approx(0.040).epsilon(0.05));

    cost.clear();
    const auto z = cost.summary();
    CHECK(z.events == 0);
    CHECK(z.seconds == 0);
    CHECK(z.stacks_seconds == 0);
}

TEST_CASE("event_cost: a thread's clock times its first events once each, then one in kOneIn, weighted",
          "[event_cost]") {
    static_assert(EventCost::kOneIn == 16 && EventCost::kTimedFirst == 256);
    EventCost cost;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // A new thread: its events 0-255 are timed once each, then 256, 272... 16 times each. Event 0
    // spends 1 ms (a first event's one-time work), 256 and 272 2 ms, 257 (not timed) 20 ms:
    // counted, 257 would add 320 ms; weighted, event 0 would add 15 ms more.
    int timed_wrong = 0;
    std::thread([&] {
        for (int i = 0; i < 288; ++i) {
            EventCost::Clock clock(cost);
            timed_wrong += clock.timed() != (i < 256 || i % 16 == 0);
            clock.mark();
            if (i == 0)
                spin_for(std::chrono::milliseconds(1));
            if (i == 256 || i == 272)
                spin_for(std::chrono::milliseconds(2));
            if (i == 257)
                spin_for(std::chrono::milliseconds(20));
            clock.lap(EventCost::stacks);
            clock.lap(EventCost::mirror);
            clock.done();
        }
    }).join();
    CHECK(timed_wrong == 0);
    const auto s = cost.summary();
    CHECK(s.events == 288);
    CHECK(s.stacks_seconds >= (0.001 + 2 * 16 * 0.002) * 0.95);
    CHECK(s.stacks_seconds < 0.25); // the untimed one is not in it
    CHECK(s.mirror_seconds < s.stacks_seconds);
    CHECK(s.seconds >= s.stacks_seconds + s.mirror_seconds);
}

TEST_CASE("event_cost: a process with few events is timed whole, its first event once", "[event_cost]") {
    // A forked child that makes 4 events, the first with 5 ms of one-time work: the report read
    // 16 times that (80 ms) when the first event was weighted as one in kOneIn.
    EventCost cost;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::thread([&] {
        for (int i = 0; i < 4; ++i) {
            EventCost::Clock clock(cost);
            clock.mark();
            if (i == 0)
                spin_for(std::chrono::milliseconds(5));
            clock.lap(EventCost::kinds);
            clock.done();
        }
    }).join();
    const auto s = cost.summary();
    CHECK(s.events == 4);
    CHECK(s.kinds_seconds >= 0.0047);
    CHECK(s.kinds_seconds < 0.03);
    CHECK(s.seconds >= s.kinds_seconds);
    CHECK(s.seconds < 0.03);
}

TEST_CASE("event_cost: a rare costly path timed by its caller counts once, timed event or not", "[event_cost]") {
    // A new call site's frames are read once in thousands of events: in a timed event (0) and in
    // one not timed (257), 10 ms each. Weighted, 257's would count 16 times (160 ms) or, were it
    // left to the sampling, not at all; in event 0 the lap must not count it a second time.
    EventCost cost;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::thread([&] {
        for (int i = 0; i < 260; ++i) {
            EventCost::Clock clock(cost);
            clock.mark();
            if (i == 0 || i == 257) {
                const std::uint64_t t0 = CycleClock::now();
                spin_for(std::chrono::milliseconds(10));
                clock.exact(EventCost::traits, CycleClock::now() - t0);
            }
            clock.lap(EventCost::traits);
            clock.done();
        }
    }).join();
    const auto s = cost.summary();
    CHECK(s.traits_seconds >= 0.019);
    CHECK(s.traits_seconds < 0.027);
    CHECK(s.seconds >= s.traits_seconds);
    CHECK(s.seconds < 0.027 + 0.01);
}
