// SPDX-License-Identifier: MIT
// Entry points the core calls at exit or on demand: <prefix>.json (json_report.hpp), and the
// stack reports <prefix>.txt, <prefix>.folded, <prefix>.alloc.folded. Each file is written
// atomically, whole or not at all.
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

/// Collect Recorder::instance() and symbolise in this process (each address once per process).
/// Never throws.
StackReport prepare_stack_report(const ReportInput& in);
/// The same from data collected already (the core collects it beside its own snapshot).
StackReport prepare_stack_report(const ReportInput& in, const stacks::ReportData& data);

/// The three stack reports' (path, content), from a prepared report (report.ok). May throw.
std::vector<std::pair<std::string, std::string>> report_files(const ReportInput& in, const StackReport& report);

/// Writes <prefix>.json and, when the stack report is ready, <prefix>.txt, <prefix>.folded and
/// <prefix>.alloc.folded: all or none (util::write_files_atomic). Returns false and sets *error on
/// failure; never throws.
bool write_all_reports(const ReportInput& in, const StackReport& report, std::string* error);

/// `data`'s stacks resolved with the process's symbolizer (under its lock): `stack_skip` as
/// GPUMEMPROF_STACK_SKIP (nullptr: the default), `python_mode` as ReportInput::python_frames.
ResolvedReport resolve_stacks(const stacks::ReportData& data, const char* stack_skip, int python_mode);

/// Writes <prefix>.json. Returns false and sets *error on failure (then no file is written);
/// never throws.
bool write_json_report(const ReportInput& in, const StackReport& report, std::string* error);

/// Writes <prefix>.txt, <prefix>.folded (bytes live at the global peak) and <prefix>.alloc.folded
/// (total bytes allocated), all or none. Returns false and sets *error on failure; never throws.
bool write_reports(const ReportInput& in, const StackReport& report, std::string* error);

/// The same with the data and the symbolizer given (tests, offline tools). append_json adds
/// "sites", "peak", "leaks", "ooms" and "stacks" to the object `w` is positioned in.
bool write_reports(const ReportInput& in, const stacks::ReportData& data, Symbolizer& symbolizer, std::string* error);
void append_json(util::JsonWriter& w, const ReportInput& in, const stacks::ReportData& data, Symbolizer& symbolizer);

} // namespace gpumemprof::report
