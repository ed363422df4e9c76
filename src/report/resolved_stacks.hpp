// SPDX-License-Identifier: MIT
// ReportData with every stack symbolised: the profiler's own, CUDA-library and loader frames
// dropped from the top, sites whose remaining stacks are equal merged.
#pragma once

#include "report/symbolizer.hpp"
#include "stacks/report_data.hpp"

#include <algorithm>
#include <cstddef>
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
    std::string suggestion;          ///< the recorded advice, else oom_suggestion() for alloc_conf
};

struct ResolvedReport {
    std::vector<ResolvedSite> sites; ///< in order of first appearance in ReportData.sites
    std::vector<ResolvedOom> ooms;
    /// site_of[i]: index in `sites` of ReportData.sites[i] (sites with equal stacks merge).
    std::vector<std::size_t> site_of;
    /// Frame labels (innermost first) of the call that ended reuse at once (ReuseSummary).
    std::vector<std::string> reuse_lost_where;
};

/// How Python frames (stacks::python) enter a resolved stack: `merged` (default) puts them in
/// place of the interpreter's eval-loop frames and leaves out the interpreter's other frames;
/// `all` keeps the interpreter's frames too (GPUMEMPROF_PYTHON=all).
enum class PythonFrames { merged, all };

/// `data` must outlive the result (OOM records are referenced, not copied). `alloc_conf` (the
/// GPUMEMPROF_ALLOC_CONF text) judges the advice of OOMs recorded without one.
ResolvedReport resolve_report(const stacks::ReportData& data, Symbolizer& symbolizer,
                              const std::vector<std::string>& skip, const std::string& alloc_conf = {},
                              PythonFrames python = PythonFrames::merged);

/// One stack's frame labels (frame_label), innermost first, after the skipped top and with the
/// Python frames merged as in the reports; at most `max_frames`.
std::vector<std::string> stack_labels(const std::vector<std::uintptr_t>& ips, Symbolizer& symbolizer,
                                      const std::vector<std::string>& skip, PythonFrames python,
                                      std::size_t max_frames);

/// Indices into r.sites of the sites with key(site).first > 0, largest first, ties in report
/// order. `key` maps a ResolvedSite to a (bytes, count) pair; the tables of every report use it.
template <typename Key> std::vector<std::size_t> ranked_sites(const ResolvedReport& r, Key key) {
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < r.sites.size(); ++i)
        if (key(r.sites[i]).first > 0)
            idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return key(r.sites[a]).first > key(r.sites[b]).first; });
    return idx;
}

} // namespace gpumemprof::report
