// SPDX-License-Identifier: MIT
// Entry points the core calls at exit or on demand: the stack reports (<prefix>.txt,
// <prefix>.folded, <prefix>.alloc.folded) and the stack keys of the exit JSON.
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"
#include "report/symbolizer.hpp"
#include "stacks/report_data.hpp"
#include "util/json_writer.hpp"

#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::report {

/// The recorder's data collected once and symbolised once: one dump's JSON and text describe the
/// same moment, and the work is not done twice.
/// `resolved` points into `data`: moving keeps both valid (vector buffers move), copying would not.
struct StackReport {
    stacks::ReportData data;
    ResolvedReport resolved;
    bool ok = false; ///< false: collecting or symbolising failed (reports then say so)

    StackReport() = default;
    StackReport(StackReport&&) = default;
    StackReport& operator=(StackReport&&) = default;
    StackReport(const StackReport&) = delete;
    StackReport& operator=(const StackReport&) = delete;
};

/// Collect Recorder::instance() and symbolise in this process. Never throws.
StackReport prepare_stack_report(const ReportInput& in);
/// The three stack reports' (path, content), from a prepared report (report.ok). May throw.
std::vector<std::pair<std::string, std::string>> report_files(const ReportInput& in, const StackReport& report);
/// The writers below, from a prepared report.
bool write_reports(const ReportInput& in, const StackReport& report, std::string* error);
void append_json(util::JsonWriter& w, const ReportInput& in, const StackReport& report);

/// Writes <prefix>.txt, <prefix>.folded (bytes live at the global peak) and <prefix>.alloc.folded
/// (total bytes allocated), all or none (util::write_files_atomic), from
/// Recorder::instance().collect(). Symbolises in this process (each address once per process).
/// Returns false and sets *error on failure; never throws.
bool write_reports(const ReportInput& in, std::string* error);

/// Adds "sites", "peak", "leaks", "ooms" and "stacks" to the object `w` is positioned in.
/// Never throws (on failure the keys may be missing, the JSON stays well formed).
void append_json(util::JsonWriter& w, const ReportInput& in);

/// The same with the data and the symbolizer given (tests, offline tools).
bool write_reports(const ReportInput& in, const stacks::ReportData& data, Symbolizer& symbolizer,
                   std::string* error);
void append_json(util::JsonWriter& w, const ReportInput& in, const stacks::ReportData& data,
                 Symbolizer& symbolizer);

} // namespace gpumemprof::report
