// SPDX-License-Identifier: MIT
// `gpumemprof diff BASE NEW`: two runs aligned by call site (site_key), not by address: the
// peaks of each, their deltas, and the sites whose bytes at the peak and total bytes changed
// most; `--fail-if-peak-grows PCT` makes it a CI memory gate. `--steps A B` compares two steps
// of one run (gpumemprof_mark_step): exactly, sites included, from a trace; the peaks from a
// JSON report's timeline.
#pragma once

#include "tools/run_summary.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace gpumemprof::tools {

/// One side of a diff: a run, or one step of a run.
struct DiffSide {
    std::string label;
    std::int64_t peak_allocated = 0;
    std::int64_t peak_reserved = 0;
    std::int64_t allocated_at_start = -1; ///< steps only: what was allocated when the step began
    bool has_sites = false;
    bool exact = true; ///< false: the peaks come from timeline points (the most within each)
    std::map<std::string, SiteBytes> sites;
};

DiffSide side_of_run(const RunSummary& run);

/// Steps `a` and `b` of a trace (exact: events replayed, sites at each step's peak and bytes
/// allocated in it). False with *error.
bool steps_of_trace(const std::string& path, const SiteKeys& keys, std::int64_t a, std::int64_t b, DiffSide* sa,
                    DiffSide* sb, std::string* error);

/// Steps `a` and `b` of a report (its "steps" and timeline: peaks only). False with *error.
bool steps_of_report(const RunSummary& run, std::int64_t a, std::int64_t b, DiffSide* sa, DiffSide* sb,
                     std::string* error);

/// NEW's peak allocated exceeds BASE's by more than `pct` percent.
bool peak_grew(std::int64_t base, std::int64_t now, double pct);

int cmd_diff(int argc, char** argv);

} // namespace gpumemprof::tools
