// SPDX-License-Identifier: MIT
// The human-readable exit report (<prefix>.txt).
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"

#include <string>

namespace gpumemprof::report {

/// Sections: summary per device, top call sites by bytes live at the global peak and by total
/// bytes allocated, the line-profile tree (cumulative and at-peak views), leaks at exit grouped by
/// call site, every OOM with its stack, pool state and a suggestion.
/// `accounting`: the device accounting's section (accounting_report.hpp), put after the summary.
std::string text_report(const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& r,
                        const std::string& accounting = {});

} // namespace gpumemprof::report
