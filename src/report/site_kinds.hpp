// SPDX-License-Identifier: MIT
// The kind of memory of each call site of a report (parameters, activations, library
// workspaces...: core/memory_categories.hpp), known for PyTorch's blocks when the profiler is
// attached to its allocator. Each device's summary names its sites by stack id; the reports
// name them by their place in ResolvedReport::sites.
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"

#include <string>
#include <vector>

namespace gpumemprof::report {

/// By index in r.sites: the site's kind, or nullptr where none is known. A site that merged
/// several stacks takes the first known kind (devices in order).
std::vector<const DeviceSummary::SiteKind*> site_kinds(const ReportInput& in, const ResolvedReport& r);

/// What the text and HTML reports call each site's kind (r.sites' order): its kind of memory.
/// Attached to PyTorch's allocator, a block outside it has none, and is named by whose it is:
/// "cuBLAS's own memory" (a library's cudaMalloc), "PyTorch's own memory" (its pinned host
/// buffers), or "outside PyTorch's allocator" (the program's). "" where nothing is known (not
/// attached), and for a site that only acquired segments (no block of its own to have a kind).
/// `owners`: site_owners(in, r, kinds).
std::vector<std::string> site_kind_labels(const ReportInput& in, const ResolvedReport& r,
                                          const std::vector<const DeviceSummary::SiteKind*>& kinds,
                                          const std::vector<std::string>& owners);

} // namespace gpumemprof::report
