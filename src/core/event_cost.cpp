// SPDX-License-Identifier: MIT
#include "core/event_cost.hpp"

namespace gpumemprof::core {

namespace {
thread_local std::uint32_t t_events __attribute__((tls_model("initial-exec"))) = 0;
} // namespace

EventCost::Clock::Clock(EventCost& cost) noexcept {
    cost.count();
    if (t_events++ % kOneIn != 0)
        return;
    cost_ = &cost;
    start_ = last_ = util::CycleClock::now();
}

EventCost::Clock::Clock(EventCost& cost, Uncounted) noexcept {
    if (t_events++ % kOneIn != 0)
        return;
    cost_ = &cost;
    start_ = last_ = util::CycleClock::now();
}

report::EventCostSummary EventCost::summary() const noexcept {
    report::EventCostSummary s;
    s.events = events_.load(std::memory_order_relaxed);
    const double ns = clock_.ns_per_tick();
    const auto seconds = [&](Part p) {
        return static_cast<double>(ticks_[p].load(std::memory_order_relaxed)) * ns * 1e-9;
    };
    s.seconds = seconds(whole);
    s.stacks_seconds = seconds(stacks);
    s.backward_seconds = seconds(backward);
    s.traits_seconds = seconds(traits);
    s.kinds_seconds = seconds(kinds);
    s.mirror_seconds = seconds(mirror);
    s.handover_seconds = seconds(handover);
    s.deferred_seconds = seconds(deferred);
    return s;
}

} // namespace gpumemprof::core
