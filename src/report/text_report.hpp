// SPDX-License-Identifier: MIT
// The human-readable exit report (<prefix>.txt).
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"
#include "util/output_sink.hpp"

#include <string>

namespace gpumemprof::report {

/// Sections: summary per device, top call sites by bytes live at the global peak and by total
/// bytes allocated, the line-profile tree (cumulative and at-peak views, each at most
/// kTreeLines lines), leaks at exit grouped by call site (the 1,000 largest, then what the rest
/// hold), every OOM with its stack, pool state and a suggestion. Written into `out` as it is
/// made; false when `out` failed.
/// `accounting`: the device accounting's section (accounting_report.hpp), put after the summary.
bool write_text(util::OutputSink& out, const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& r,
                const std::string& accounting = {});
/// The same as one string (tests, small reports).
std::string text_report(const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& r,
                        const std::string& accounting = {});

} // namespace gpumemprof::report
