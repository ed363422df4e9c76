// SPDX-License-Identifier: MIT
// ReportData with every stack symbolised: the profiler's own, CUDA-library and loader frames
// dropped from the top, sites whose remaining stacks are equal merged. Frames are kept once
// (FrameTable) and stacks as a prefix tree of them (StackTree): the memory of a report grows
// with its distinct frames and tree nodes, not with sites times frames.
#pragma once

#include "report/frame_table.hpp"
#include "report/stack_tree.hpp"
#include "report/symbolizer.hpp"
#include "stacks/report_data.hpp"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::report {

inline constexpr const char* kDefaultStackSkip = "libgpumemprof,libcudart,libcuda.so,ld-linux,libdl";

/// Splits GPUMEMPROF_STACK_SKIP ("a,b,c"; empty entries ignored). nullptr gives the default.
std::vector<std::string> parse_skip_list(const char* spec);

struct ResolvedSite {
    std::uint32_t stack = 0;   ///< StackTree node of its innermost frame (0: no frames)
    std::uint32_t members = 1; ///< ReportData sites merged into it
    /// Summed over the merged sites: the one member's own counters in ReportData, or the sum
    /// the report keeps (ResolvedReport::merged_counters) for a site of several members.
    const stacks::SiteCounters* sum = nullptr;
    const stacks::SiteCounters& counters() const { return *sum; }
};

struct ResolvedOom {
    const stacks::OomRecord* record = nullptr;
    std::uint32_t stack = 0; ///< StackTree node of its innermost frame
    std::string suggestion;  ///< the recorded advice, else oom_suggestion() for alloc_conf
};

/// Move-only: its sites point into ReportData (which must outlive it) and into merged_counters.
struct ResolvedReport {
    ResolvedReport() = default;
    ResolvedReport(ResolvedReport&&) = default;
    ResolvedReport& operator=(ResolvedReport&&) = default;
    ResolvedReport(const ResolvedReport&) = delete;
    ResolvedReport& operator=(const ResolvedReport&) = delete;

    FrameTable frames;               ///< every frame of the sites and OOMs, once
    StackTree stacks;                ///< their stacks, root (outermost) first; inlined frames expanded
    std::vector<ResolvedSite> sites; ///< in order of first appearance in ReportData.sites
    std::vector<ResolvedOom> ooms;
    /// site_of[i]: index in `sites` of ReportData.sites[i] (sites with equal stacks merge).
    std::vector<std::uint32_t> site_of;
    /// Frame labels (innermost first) of the call that ended reuse at once (ReuseSummary).
    std::vector<std::string> reuse_lost_where;
    /// (StackId, index in `sites`) of every ReportData site, by id.
    std::vector<std::pair<stacks::StackId, std::uint32_t>> by_id;
    /// The sums of the sites of several members (a deque: its elements never move).
    std::deque<stacks::SiteCounters> merged_counters;

    /// The index in `sites` of the site of stack `id`, or -1 when no site has it.
    std::ptrdiff_t site_by_id(stacks::StackId id) const;
    /// The frames of a stack, root first, as copies (tests and small uses; the writers walk
    /// `stacks` and `frames` instead).
    std::vector<SymbolFrame> frames_of(std::uint32_t stack) const;
};

/// How Python frames (stacks::python) enter a resolved stack: `merged` (default) puts them in
/// place of the interpreter's eval-loop frames and leaves out the interpreter's other frames;
/// `all` keeps the interpreter's frames too (GPUMEMPROF_PYTHON=all).
enum class PythonFrames { merged, all };

/// The raw frames (innermost first) of a site collected without them (ReportData filled by
/// Recorder::collect(false)): the live process reads them from the recorder one site at a time.
using RawFrames = std::function<void(stacks::StackId, std::vector<std::uintptr_t>*)>;

/// `data` must outlive the result (OOM records and counters are referenced, not copied). `alloc_conf` (the
/// GPUMEMPROF_ALLOC_CONF text) judges the advice of OOMs recorded without one. A site whose
/// `frames` are empty takes them from `raw` when given.
ResolvedReport resolve_report(const stacks::ReportData& data, Symbolizer& symbolizer,
                              const std::vector<std::string>& skip, const std::string& alloc_conf = {},
                              PythonFrames python = PythonFrames::merged, const RawFrames& raw = {});

/// One stack's frame labels (frame_label), innermost first, after the skipped top and with the
/// Python frames merged as in the reports; at most `max_frames`.
std::vector<std::string> stack_labels(const std::vector<std::uintptr_t>& ips, Symbolizer& symbolizer,
                                      const std::vector<std::string>& skip, PythonFrames python,
                                      std::size_t max_frames);

/// Indices into r.sites of the sites with key(site).first > 0, largest first, ties in report
/// order. `key` maps a ResolvedSite to a (bytes, count) pair; the tables of every report use it.
template <typename Key> std::vector<std::uint32_t> ranked_sites(const ResolvedReport& r, Key key) {
    std::vector<std::uint32_t> idx;
    for (std::size_t i = 0; i < r.sites.size(); ++i)
        if (key(r.sites[i]).first > 0)
            idx.push_back(static_cast<std::uint32_t>(i));
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return key(r.sites[a]).first > key(r.sites[b]).first; });
    return idx;
}

} // namespace gpumemprof::report
