// SPDX-License-Identifier: MIT
// core/kind_timeline: which changes of the bytes by kind become points (the step rule), the peak
// and the latest state put in place, thinning that keeps the fuller of two neighbours; and
// core/memory_categories feeding it: a training step's kinds over time.
#include "core/kind_timeline.hpp"
#include "core/memory_categories.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof::core;

namespace {

constexpr std::int64_t MiB = 1 << 20;

// Bytes of kinds 0 (parameters), 1 (gradients) and 4 (temporaries).
TimelineBytes bytes(std::int64_t params, std::int64_t grads, std::int64_t temps) {
    TimelineBytes b{};
    b[0] = params;
    b[1] = grads;
    b[4] = temps;
    return b;
}

std::vector<std::pair<std::int64_t, TimelineBytes>> points(const KindTimelineData& d) {
    std::vector<std::pair<std::int64_t, TimelineBytes>> out;
    for (const KindPoint& p : d.points)
        out.emplace_back(p.t_ns, p.bytes);
    return out;
}

using P = std::vector<std::pair<std::int64_t, TimelineBytes>>;

} // namespace

TEST_CASE("kind timeline: a change is a point once it moved the bytes by the step from the last point") {
    KindTimeline t(64, MiB);
    t.change(10, bytes(4 * MiB, 0, 0));       // the first change: a point
    t.change(20, bytes(4 * MiB, 0, MiB / 2)); // moved 0.5 MiB < the step (1 MiB): not a point
    t.change(30, bytes(4 * MiB, 0, MiB));     // moved 1 MiB from the point at 10: a point
    // A temporary that becomes a gradient: the total stays, the kinds moved by 2 x 1 MiB.
    t.change(40, bytes(4 * MiB, MiB, 0));
    t.change(50, bytes(4 * MiB, MiB, 0)); // the same bytes: not a point, but the latest state
    const KindTimelineData d = t.data();
    CHECK(d.changes == 5);
    CHECK(d.slot_ns == 0);
    // The latest state ends the series (the chart then spans until 50).
    CHECK(points(d) == P{{10, bytes(4 * MiB, 0, 0)},
                         {30, bytes(4 * MiB, 0, MiB)},
                         {40, bytes(4 * MiB, MiB, 0)},
                         {50, bytes(4 * MiB, MiB, 0)}});
}

TEST_CASE("kind timeline: the step grows with the total (1% of the last point's), floored by the minimum") {
    KindTimeline t(64, MiB);
    t.change(1, bytes(1000 * MiB, 0, 0));
    t.change(2, bytes(1000 * MiB, 0, 9 * MiB));  // 9 MiB < 10 MiB (1% of 1000 MiB): not a point
    t.change(3, bytes(1000 * MiB, 0, 10 * MiB)); // 10 MiB: a point
    t.change(4, bytes(1000 * MiB, 0, 0));        // back down by 10 MiB (1% of 1010 MiB is 10.1): the latest state
    const KindTimelineData d = t.data();
    // Points 1 and 3; the peak is point 3; the latest state (4) is put at the end.
    CHECK(points(d) ==
          P{{1, bytes(1000 * MiB, 0, 0)}, {3, bytes(1000 * MiB, 0, 10 * MiB)}, {4, bytes(1000 * MiB, 0, 0)}});
}

TEST_CASE("kind timeline: a peak that no point holds is put in its place") {
    KindTimeline t(64, 4 * MiB);
    t.change(100, bytes(0, 0, 8 * MiB));
    t.change(200, bytes(0, 0, 11 * MiB)); // +3 MiB < 4 MiB: not a point, but the largest total
    t.change(300, bytes(0, 0, 9 * MiB));  // 1 MiB from the point: not a point
    t.change(400, bytes(0, 0, 4 * MiB));  // 4 MiB from the point: a point
    const KindTimelineData d = t.data();
    CHECK(points(d) == P{{100, bytes(0, 0, 8 * MiB)}, {200, bytes(0, 0, 11 * MiB)}, {400, bytes(0, 0, 4 * MiB)}});
}

TEST_CASE("kind timeline: when full, of each pair the one with more bytes stays; then slots keep their fullest") {
    KindTimeline t(4, MiB);
    // Totals 1, 5, 2, 3 MiB at t = 0, 10, 20, 30: the fourth point fills the capacity; pairs
    // (0, 10) and (20, 30) keep 10 (5 MiB) and 30 (3 MiB). The slot is then
    // max(0, span 20 / (4 / 2), 1) = 10 ns from the last point's time.
    t.change(0, bytes(0, 0, MiB));
    t.change(10, bytes(0, 0, 5 * MiB));
    t.change(20, bytes(0, 0, 2 * MiB));
    t.change(30, bytes(0, 0, 3 * MiB));
    CHECK(t.size() == 2);
    // Inside the slot [30, 40): 4 MiB replaces the point at 30 (more bytes), 1 MiB does not.
    t.change(35, bytes(0, 0, 4 * MiB));
    t.change(38, bytes(0, 0, MiB));
    // After the slot: a new point (3 MiB moved from the 4 MiB point at 35).
    t.change(41, bytes(0, 0, 7 * MiB));
    const KindTimelineData d = t.data();
    CHECK(d.slot_ns == 10);
    CHECK(d.changes == 7);
    CHECK(points(d) == P{{10, bytes(0, 0, 5 * MiB)}, {35, bytes(0, 0, 4 * MiB)}, {41, bytes(0, 0, 7 * MiB)}});
}

TEST_CASE("kind timeline: a long run stays within its capacity and keeps its peak") {
    KindTimeline t(16, MiB);
    for (int i = 0; i < 10000; ++i)
        t.change(i * 100, bytes(0, 0, (i % 10 + 1) * MiB + (i == 4321 ? 100 * MiB : 0)));
    CHECK(t.size() < 16);
    const KindTimelineData d = t.data();
    std::int64_t most = 0, at = -1;
    for (const KindPoint& p : d.points)
        if (p.total() > most)
            most = p.total(), at = p.t_ns;
    CHECK(most == 102 * MiB); // 4321 % 10 + 1 = 2 MiB, plus 100
    CHECK(at == 432100);
    CHECK(d.points.back().t_ns == 999900); // the latest state ends the series
}

TEST_CASE("memory categories over time: a step's blocks and their kinds as timeline points") {
    MemoryCategories m;
    const MemoryCategories::SiteTraits plain{}, params{false, true, false}, optim{true, false, false};
    // t=1: a parameter (4 MiB, under Module.to); t=2: the forward output (8 MiB, a temporary:
    // nothing learned yet); t=3: backward allocates 2 MiB and frees the output; t=4: it frees its
    // block, AccumulateGrad makes the gradient (4 MiB); t=5: the optimizer allocates 8 MiB; t=6:
    // the next forward's output (8 MiB) at the same site: the optimizer's block outlived its step
    // (optimizer state now) and the output is an activation.
    m.on_alloc(1, 0x1000, 4 * MiB, 11, false, false, false, params);
    m.on_alloc(2, 0x2000, 8 * MiB, 12, false, false, false, plain);
    m.on_alloc(3, 0x3000, 2 * MiB, 13, true, false, false, plain);
    m.on_free(3, 0x2000, true);
    m.on_free(4, 0x3000, true);
    m.on_alloc(4, 0x4000, 4 * MiB, 14, true, true, false, plain);
    m.on_alloc(5, 0x5000, 8 * MiB, 15, false, false, false, optim);
    m.on_alloc(6, 0x6000, 8 * MiB, 12, false, false, false, plain);
    const MemoryCategories::Summary s = m.summary();
    KindBytes p{}, t1 = p, t2 = p, t3 = p, t4 = p, t5 = p, t6 = p;
    const auto k = [](MemoryKind kind) { return static_cast<int>(kind); };
    t1[k(MemoryKind::parameters)] = 4 * MiB;
    t2 = t1;
    t2[k(MemoryKind::temporaries)] = 8 * MiB;
    t3 = t1; // the last change at t=3 freed the output: 2 MiB of backward temporaries left
    t3[k(MemoryKind::temporaries)] = 2 * MiB;
    t4 = t1; // the backward block freed, the gradient made
    t4[k(MemoryKind::gradients)] = 4 * MiB;
    t5 = t4; // the optimizer's block outlives its step: optimizer state since it was allocated
    t5[k(MemoryKind::optimizer_state)] = 8 * MiB;
    t6 = t4;
    t6[k(MemoryKind::optimizer_state)] = 8 * MiB;
    t6[k(MemoryKind::activations)] = 8 * MiB; // site 12's block was freed by the backward pass: rule 7
    // Changes at the same time: the later state holds (t=3 twice, t=4 twice).
    std::vector<std::pair<std::int64_t, KindBytes>> got;
    for (const KindPoint& q : s.timeline.points)
        got.emplace_back(q.t_ns, q.bytes);
    CHECK(got == std::vector<std::pair<std::int64_t, KindBytes>>{{1, t1}, {2, t2}, {3, t3}, {4, t4}, {5, t5}, {6, t6}});
    CHECK(s.timeline.changes == 8);
    CHECK(m.live_now() == t6);
    // The rules' work: backward (t=3), the optimizer step (t=5), forward (t=6); the backward
    // pass's one temporary (freed) and the step's one block looked at when each ended; the
    // step's block outlived it and moved the one point since its allocation (t=5).
    CHECK(s.phase_changes == 3);
    CHECK(s.survivor_checks == 2);
    CHECK(s.survivors == 1);
    CHECK(s.points_moved == 1);
}

TEST_CASE("memory categories: the peak's split names what a block turned out to be") {
    MemoryCategories m;
    const MemoryCategories::SiteTraits plain{}, params{false, true, false}, optim{true, false, false};
    // A parameter (4 MiB); the first optimizer step allocates its state (8 MiB) and a temporary
    // (8 MiB): the peak, 20 MiB; the temporary is freed; the next forward allocates 2 MiB, and the
    // state, still live, is optimizer state, also at the peak. A block allocated after the peak
    // that turns into optimizer state leaves the peak alone.
    m.on_alloc(1, 0x1000, 4 * MiB, 11, false, false, false, params);
    m.on_alloc(2, 0x2000, 8 * MiB, 15, false, false, false, optim);
    m.on_alloc(3, 0x3000, 8 * MiB, 16, false, false, false, optim);
    m.on_free(4, 0x3000, false);
    m.on_alloc(5, 0x4000, 2 * MiB, 12, false, false, false, plain);
    m.on_free(6, 0x4000, false);
    m.on_alloc(7, 0x5000, 1 * MiB, 15, false, false, false, optim); // a second step's new state
    m.on_alloc(8, 0x6000, 1 * MiB, 12, false, false, false, plain);
    const MemoryCategories::Summary s = m.summary();
    const auto k = [](MemoryKind kind) { return static_cast<int>(kind); };
    KindBytes peak{};
    peak[k(MemoryKind::parameters)] = 4 * MiB;
    peak[k(MemoryKind::optimizer_state)] = 8 * MiB;
    peak[k(MemoryKind::temporaries)] = 8 * MiB;
    CHECK(s.peak_total == 20 * MiB);
    CHECK(s.at_peak == peak);
    KindBytes now{};
    now[k(MemoryKind::parameters)] = 4 * MiB;
    now[k(MemoryKind::optimizer_state)] = 9 * MiB;
    now[k(MemoryKind::temporaries)] = 1 * MiB;
    CHECK(s.now == now);
    // The timeline's point at t=3 (the peak) says the same.
    bool found = false;
    for (const KindPoint& q : s.timeline.points)
        if (q.t_ns == 3) {
            found = true;
            CHECK(q.bytes == peak);
        }
    CHECK(found);
}
