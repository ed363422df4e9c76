// SPDX-License-Identifier: MIT
// `gpumemprof merge FILE...`: many processes' reports (or traces, or partial merges) as one job:
// per-rank peaks, the imbalance, the call sites whose bytes at each rank's peak differ most,
// the first OOM and what every rank held then (on the wall clock), and per-host sums. Inputs
// are read one at a time; each leaves only its summary (figures, timeline of at most 512 points,
// the sites live at its peak).
#pragma once

#include "tools/run_summary.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpumemprof::tools {

/// One rank as merge keeps it.
struct MergedRank {
    RunSummary run;                                              ///< `sites` emptied into at_peak
    std::vector<std::pair<std::uint32_t, std::int64_t>> at_peak; ///< site id -> bytes, by id
};

/// A call site's bytes at each rank's peak.
struct SiteSpread {
    std::uint32_t id = 0;
    std::int64_t min = 0, max = 0;
    std::size_t min_rank = 0, max_rank = 0; ///< indices into MergeResult::ranks
    std::vector<std::int64_t> per_rank;     ///< in MergeResult::ranks order
    std::int64_t spread() const { return max - min; }
};

/// What a rank held when the first OOM of the job happened.
struct HeldThen {
    std::size_t rank = 0; ///< index into MergeResult::ranks
    enum class State { held, not_started, ended, unknown } state = State::unknown;
    std::int64_t allocated = 0; ///< over its devices: the most held in the timeline point then
    std::int64_t reserved = 0;
    std::int64_t within_ns = 0; ///< that point's span (0: exact)
};

struct FirstOom {
    std::size_t rank = 0;
    int device = 0;
    std::int64_t t_ns = 0;  ///< since the job's start (the earliest start of all ranks)
    std::int64_t bytes = 0; ///< the request
    bool aligned = true;    ///< every rank's start is on the wall clock
    std::vector<HeldThen> held;
};

struct HostSum {
    std::string host;
    std::size_t ranks = 0;
    std::int64_t peak_allocated = 0; ///< the sum of its ranks' peaks
    std::int64_t peak_reserved = 0;
    std::int64_t ooms = 0;
};

struct MergeResult {
    std::vector<MergedRank> ranks; ///< by rank (unknown ranks last, in input order)
    std::vector<std::string> site_names;
    std::vector<SiteSpread> sites; ///< the widest spreads first
    std::size_t sites_compared = 0;
    std::optional<FirstOom> first_oom;
    std::vector<std::size_t> ooms_without_time; ///< ranks with OOMs but no OOM times
    std::vector<HostSum> hosts;
    std::uint64_t t0_ns = 0; ///< the earliest start (Unix epoch ns); 0 when unknown
    std::size_t largest = 0, smallest = 0;
    std::vector<std::string> warnings;

    /// Seconds of the rank's peak since the job's start (its own start when clocks are unknown).
    double peak_time_s(const MergedRank& r) const;
};

class Merger {
public:
    void add(RunSummary&& run);
    /// `top`: sites kept (0 = all that differ).
    MergeResult finish(std::size_t top);
    std::size_t size() const { return ranks_.size(); }

private:
    std::vector<MergedRank> ranks_;
    std::vector<std::string> names_;
    std::unordered_map<std::string, std::uint32_t> ids_;
};

int cmd_merge(int argc, char** argv);

/// The merged job as one HTML page (merge_html.cpp).
std::string merge_html(const MergeResult& m);

} // namespace gpumemprof::tools
