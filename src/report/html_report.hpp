// SPDX-License-Identifier: MIT
// <prefix>.html: one self-contained page (no network) with each device's memory timeline, a
// flame graph of live bytes at the peak and of total bytes, the line-profile tree, what was live
// at a chosen time, and the tables of the text report. The page's markup, style and script are
// source files (src/report/html/) embedded at build time; this file writes the data they read,
// one JSON object in a <script type="application/json"> element.
#pragma once

#include "report/report_input.hpp"
#include "report/reports.hpp"
#include "util/output_sink.hpp"

#include <string>

namespace gpumemprof::report {

/// The report's data as JSON (the page's input).
bool write_html_data(util::OutputSink& out, const ReportInput& in, const StackReport& report);
/// The whole page into `out` as it is made; false when `out` failed. May throw (bad_alloc).
bool write_html(util::OutputSink& out, const ReportInput& in, const StackReport& report);
/// The whole page as one string. Never throws; an empty string on failure.
std::string html_report(const ReportInput& in, const StackReport& report);

} // namespace gpumemprof::report
