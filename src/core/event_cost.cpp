// SPDX-License-Identifier: MIT
#include "core/event_cost.hpp"

namespace gpumemprof::core {

namespace {
thread_local std::uint32_t t_events __attribute__((tls_model("initial-exec"))) = 0;

/// The weight of this thread's next event: 1 (its first kTimedFirst), kOneIn (one in kOneIn
/// after them), 0 (not timed).
std::uint32_t next_weight() noexcept {
    const std::uint32_t n = t_events++;
    if (n < EventCost::kTimedFirst)
        return 1;
    return (n - EventCost::kTimedFirst) % EventCost::kOneIn == 0 ? EventCost::kOneIn : 0;
}
} // namespace

EventCost::Clock::Clock(EventCost& cost) noexcept : all_(&cost) {
    cost.count();
    weight_ = next_weight();
    if (weight_ == 0)
        return;
    cost_ = &cost;
    start_ = last_ = util::CycleClock::now();
}

EventCost::Clock::Clock(EventCost& cost, Uncounted) noexcept : all_(&cost) {
    weight_ = next_weight();
    if (weight_ == 0)
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
