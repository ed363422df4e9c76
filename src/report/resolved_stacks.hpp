// SPDX-License-Identifier: MIT
// ReportData with every stack symbolised: the profiler's own, CUDA-library and loader frames
// dropped from the top, sites whose remaining stacks are equal merged.
#pragma once

#include "report/symbolizer.hpp"
#include "stacks/report_data.hpp"

#include <string>
#include <vector>

namespace gpumemprof::report {

inline constexpr const char* kDefaultStackSkip = "libgpumemprof,libcudart,libcuda.so,ld-linux,libdl";

/// Splits GPUMEMPROF_STACK_SKIP ("a,b,c"; empty entries ignored). nullptr gives the default.
std::vector<std::string> parse_skip_list(const char* spec);

struct ResolvedSite {
    std::vector<SymbolFrame> frames; ///< root (outermost) first; inlined frames expanded
    stacks::SiteCounters counters;   ///< summed over merged sites
    std::string key;                 ///< frame labels joined: identity of the stack
};

struct ResolvedOom {
    const stacks::OomRecord* record = nullptr;
    std::vector<SymbolFrame> frames; ///< root first
};

struct ResolvedReport {
    std::vector<ResolvedSite> sites; ///< in order of first appearance in ReportData.sites
    std::vector<ResolvedOom> ooms;
};

/// `data` must outlive the result (OOM records are referenced, not copied).
ResolvedReport resolve_report(const stacks::ReportData& data, Symbolizer& symbolizer,
                              const std::vector<std::string>& skip);

} // namespace gpumemprof::report
