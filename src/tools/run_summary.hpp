// SPDX-License-Identifier: MIT
// One profiled process as `gpumemprof merge` and `gpumemprof diff` see it: its place in the job,
// each device's peaks and timeline, and its call sites' bytes keyed by site_key. Read from a
// JSON report (streamed through a SAX parser: the document is never built), from a trace (its
// offline report), or from a line of a partial merge.
#pragma once

#include "tools/site_key.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumemprof::tools {

struct TimelinePoint {
    std::int64_t t_ns = 0;      ///< since the process started
    std::int64_t allocated = 0; ///< the most allocated from t_ns to the next point
    std::int64_t reserved = 0;
};

struct OomMark {
    std::int64_t t_ns = 0;
    std::int64_t bytes = 0; ///< the request
};

struct DeviceRun {
    int device = 0;
    std::int64_t peak_allocated = 0;
    std::int64_t peak_reserved = 0;
    std::int64_t peak_allocated_t_ns = -1; ///< -1: unknown (the memory history was off)
    std::int64_t reserved_at_peak = 0;     ///< reserved bytes when allocated bytes peaked
    std::int64_t ooms = 0;
    std::int64_t points_cover_ns = 0; ///< the longest span one timeline point covers (0: exact)
    std::vector<TimelinePoint> timeline;
    std::vector<OomMark> oom_marks;
};

struct StepDeviceRun {
    int device = 0;
    std::int64_t allocated = 0;
    std::int64_t reserved = 0;
};

struct StepRun {
    std::int64_t step = 0;
    std::int64_t t_ns = 0;
    std::vector<StepDeviceRun> devices;
};

struct SiteBytes {
    std::int64_t at_peak = 0; ///< live when the process's live bytes peaked
    std::int64_t total = 0;   ///< allocated over the run
};

struct RunSummary {
    std::string file;
    std::string host;
    std::string exe;
    std::int64_t pid = 0;
    int rank = -1;
    int local_rank = -1;
    int world_size = -1;
    std::string rank_from;
    std::string cuda_visible_devices;
    std::uint64_t start_time_ns = 0; ///< Unix epoch ns of the process's time zero; 0 unknown
    double seconds_profiled = 0;
    std::vector<DeviceRun> devices;
    bool has_sites = false;                               ///< the report has call sites (stacks were captured)
    std::vector<std::pair<std::string, SiteBytes>> sites; ///< by key, each key once
    std::vector<StepRun> steps;

    /// The device with the largest peak allocated (null without devices): the run's "peak".
    const DeviceRun* peak_device() const;
    std::int64_t peak_allocated() const;
    std::int64_t peak_reserved() const; ///< the largest device's peak reserved
    std::int64_t ooms() const;          ///< over all devices
};

/// What a file holds, from its first bytes.
enum class InputKind { report, trace, partial };

/// False with *error when the file cannot be read or is none of the kinds.
bool input_kind(const std::string& path, InputKind* kind, std::string* error);

/// A JSON report's text (or a trace's offline report) into `out`; false with *error.
bool summary_from_report(std::string_view text, const SiteKeys& keys, RunSummary* out, std::string* error);

/// A report or a trace file into `out`; false with *error.
bool read_run(const std::string& path, const SiteKeys& keys, RunSummary* out, std::string* error);

/// The first line of a partial merge; each further line is one run (partial_line).
inline constexpr std::string_view kPartialHeader = "{\"gpumemprof_merge_partial\":1}";
std::string partial_line(const RunSummary& run);
/// Calls `each` with every run of a partial merge file, one line at a time; false with *error.
bool read_partial(const std::string& path, const std::function<void(RunSummary&&)>& each, std::string* error);

} // namespace gpumemprof::tools
