// SPDX-License-Identifier: MIT
// The keys of the exit JSON that place a run among others, on one clock: the process's rank
// fields, its start on the wall clock, the steps it marked, and each device's timeline (what
// `gpumemprof merge` and `gpumemprof diff --steps` read).
#pragma once

#include "report/report_input.hpp"
#include "util/json_writer.hpp"

#include <cstddef>

namespace gpumemprof::report {

/// Points a device's "timeline" keeps at most: neighbouring buckets of the series are merged
/// (keeping their maxima) to fit.
inline constexpr std::size_t kTimelinePoints = 512;

/// "rank", "local_rank", "world_size", "rank_from", "cuda_visible_devices", "start_time_ns",
/// "steps" and "steps_dropped", into the object `w` is positioned in.
void write_run_place(util::JsonWriter& w, const ReportInput& in);

/// "timeline": the series' allocated and reserved maxima over at most kTimelinePoints points,
/// the peaks' moments and the OOM markers (ns since the process started).
void write_timeline(util::JsonWriter& w, const stats::SeriesData& series);

} // namespace gpumemprof::report
