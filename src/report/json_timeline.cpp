// SPDX-License-Identifier: MIT
// The run's place and timeline in the exit JSON (see json_timeline.hpp).
#include "report/json_timeline.hpp"

#include <algorithm>

namespace gpumemprof::report {

void write_run_place(util::JsonWriter& w, const ReportInput& in) {
    w.field("rank", in.rank.rank);
    w.field("local_rank", in.rank.local_rank);
    w.field("world_size", in.rank.world_size);
    w.field("rank_from", in.rank.from);
    w.field("cuda_visible_devices", in.rank.cuda_visible_devices);
    w.field("start_time_ns", in.start_time_ns);
    w.key("steps").begin_array();
    for (const StepMark& m : in.steps) {
        w.begin_object();
        w.field("step", m.step);
        w.field("t_ns", m.t_ns);
        w.key("devices").begin_array();
        for (const StepDevice& d : m.devices) {
            w.begin_object();
            w.field("device", d.device);
            w.field("allocated", d.allocated);
            w.field("reserved", d.reserved);
            w.end_object();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array();
    w.field("steps_dropped", in.steps_dropped);
}

void write_timeline(util::JsonWriter& w, const stats::SeriesData& s) {
    const std::size_t n = s.buckets.size();
    const std::size_t per_point = n <= kTimelinePoints ? 1 : (n + kTimelinePoints - 1) / kTimelinePoints;
    constexpr int kAllocated = static_cast<int>(stats::Series::allocated);
    constexpr int kReserved = static_cast<int>(stats::Series::reserved);
    w.key("timeline").begin_object();
    w.field("points_cover_ns", per_point == 1 ? s.bucket_ns : s.bucket_ns * static_cast<std::int64_t>(per_point));
    w.field("changes", s.changes);
    w.field("peak_allocated", s.peak_allocated);
    w.field("peak_allocated_t_ns", s.peak_allocated_t_ns);
    w.field("reserved_at_peak_allocated", s.reserved_at_peak_allocated);
    w.field("peak_reserved", s.peak_reserved);
    w.field("peak_reserved_t_ns", s.peak_reserved_t_ns);
    // Point i: the first change of its buckets, and the most each series held in them.
    std::vector<std::int64_t> t, allocated, reserved;
    for (std::size_t i = 0; i < n; i += per_point) {
        const std::size_t end = std::min(n, i + per_point);
        std::int64_t a = 0, r = 0;
        for (std::size_t j = i; j < end; ++j) {
            a = std::max(a, s.buckets[j].max[kAllocated]);
            r = std::max(r, s.buckets[j].max[kReserved]);
        }
        t.push_back(s.buckets[i].t0_ns);
        allocated.push_back(a);
        reserved.push_back(r);
    }
    for (const auto& [name, column] : {std::pair{"t_ns", &t}, {"allocated", &allocated}, {"reserved", &reserved}}) {
        w.key(name).begin_array();
        for (std::int64_t v : *column)
            w.value(v);
        w.end_array();
    }
    w.key("ooms").begin_array();
    for (const stats::SeriesMarker& m : s.markers)
        if (m.kind == stats::MarkerKind::oom) {
            w.begin_object();
            w.field("t_ns", m.t_ns);
            w.field("bytes", m.bytes);
            w.end_object();
        }
    w.end_array();
    w.end_object();
}

} // namespace gpumemprof::report
