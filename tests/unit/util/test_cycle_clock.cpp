// SPDX-License-Identifier: MIT
// util::CycleClock::steady_at: the steady-clock time of a time-stamp counter reading taken
// earlier on another thread (PyTorch's events carry only the counter to the profiler's thread).
#include "util/cycle_clock.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>

using gpumemprof::util::CycleClock;
using namespace std::chrono;

namespace {

double ms_between(steady_clock::time_point a, steady_clock::time_point b) {
    return duration<double, std::milli>(b - a).count();
}

} // namespace

TEST_CASE("steady_at gives an earlier reading the time it was taken, not the time it is converted") {
    CycleClock clock;
    std::this_thread::sleep_for(milliseconds(30)); // the rate is measured over this
    const auto before = steady_clock::now();
    const std::uint64_t ticks = CycleClock::now();
    const auto after = steady_clock::now();
    std::this_thread::sleep_for(milliseconds(8));
    CycleClock::Anchor anchor; // first use: both clocks are read now, 8 ms later
    const auto at = clock.steady_at(ticks, anchor);
    CHECK(anchor.ns_per_tick > 0.0);
    // Within 2 ms of when it was read (the rate's error over 8 ms, a preemption), and so well
    // before the conversion.
    CHECK(ms_between(before, at) > -2.0);
    CHECK(ms_between(after, at) < 2.0);
    CHECK(ms_between(at, steady_clock::now()) > 6.0);
}

TEST_CASE("steady_at keeps its anchor for readings near it and moves it for distant ones") {
    CycleClock clock;
    std::this_thread::sleep_for(milliseconds(20));
    CycleClock::Anchor anchor;
    const std::uint64_t first = CycleClock::now();
    const auto t_first = clock.steady_at(first, anchor);
    const std::uint64_t anchored = anchor.ticks;
    std::this_thread::sleep_for(milliseconds(2));
    const std::uint64_t near = CycleClock::now();
    const auto t_near = clock.steady_at(near, anchor);
    CHECK(anchor.ticks == anchored); // no clock read for an event 2 ms away
    CHECK(ms_between(t_first, t_near) > 1.5);
    CHECK(ms_between(t_near, steady_clock::now()) > -1.0);
    std::this_thread::sleep_for(milliseconds(120));
    const std::uint64_t far = CycleClock::now();
    const auto t_far = clock.steady_at(far, anchor);
    CHECK(anchor.ticks != anchored); // 120 ms on: both clocks read again
    CHECK(ms_between(t_near, t_far) > 119.0);
    CHECK(std::abs(ms_between(t_far, steady_clock::now())) < 2.0);
}

TEST_CASE("a reading older than the anchor's reach is taken back from now") {
    // Events that waited in the queue longer than the reach: the anchor moves to now, and the
    // reading is still given its own time (a loop that kept moving the anchor would not return).
    CycleClock clock;
    std::this_thread::sleep_for(milliseconds(20));
    const auto before = steady_clock::now();
    const std::uint64_t old = CycleClock::now();
    std::this_thread::sleep_for(milliseconds(150));
    CycleClock::Anchor anchor;
    clock.steady_at(CycleClock::now(), anchor); // anchored now, 150 ms after `old`
    const std::uint64_t anchored = anchor.ticks;
    const auto t_old = clock.steady_at(old, anchor);
    CHECK(anchor.ticks != anchored);
    CHECK(std::abs(ms_between(before, t_old)) < 5.0);
    CHECK(ms_between(t_old, steady_clock::now()) > 145.0);
}
