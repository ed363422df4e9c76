// SPDX-License-Identifier: MIT
// <prefix>.json: the run, each device's memory_stats and pool figures, and the stack sections,
// all from one snapshot (ReportInput) and one collected StackReport.
#pragma once

#include "report/report_input.hpp"
#include "report/reports.hpp"
#include "util/output_sink.hpp"

#include <string>

namespace gpumemprof::report {

/// The whole JSON document into `out`, in pieces as it is made. False when `out` failed. May
/// throw (std::bad_alloc and the like): the caller then keeps no file rather than a partial one.
/// Without stack data (`stacks.ok` false) the stack sections are left out.
bool write_json(util::OutputSink& out, const ReportInput& in, const StackReport& stacks);
/// The same as one string (tests, small reports).
std::string json_report(const ReportInput& in, const StackReport& stacks);

} // namespace gpumemprof::report
