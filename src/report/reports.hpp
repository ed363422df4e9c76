// SPDX-License-Identifier: MIT
// Entry points the core calls at exit or on demand: <prefix>.json (json_report.hpp), the stack
// reports <prefix>.txt, <prefix>.folded, <prefix>.alloc.folded, and <prefix>.pickle and
// <prefix>.html. Each file is streamed to a temporary file and renamed: whole or not at all; no
// report is ever held in memory whole.
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"
#include "report/symbolizer.hpp"
#include "stacks/report_data.hpp"
#include "util/json_writer.hpp"

#include <string>
#include <vector>

namespace gpumemprof::trace {
class Writer;
}

namespace gpumemprof::report {

/// The recorder's data collected once and symbolised once: one dump's JSON and text describe the
/// same moment, and the work is not done twice.
/// `resolved` points into `data`: moving keeps both valid (vector buffers move), copying would not.
struct StackReport {
    stacks::ReportData data;
    ResolvedReport resolved;
    bool ok = false;     ///< false: collecting or symbolising failed (reports then say so)
    std::string failure; ///< when !ok and known: why ("out of memory")

    StackReport() = default;
    StackReport(StackReport&&) = default;
    StackReport& operator=(StackReport&&) = default;
    StackReport(const StackReport&) = delete;
    StackReport& operator=(const StackReport&) = delete;
};

/// Collect Recorder::instance() and symbolise in this process (each address once per process).
/// The sites' raw frames are read from the recorder one site at a time, never all copied.
/// Never throws.
StackReport prepare_stack_report(const ReportInput& in);
/// The same from data collected already (Recorder::collect(false), beside the core's snapshot).
StackReport prepare_stack_report(const ReportInput& in, stacks::ReportData data);

/// Which files a dump writes besides the JSON and the stack reports.
struct DumpFiles {
    bool pickle = true; ///< <prefix>.pickle (GPUMEMPROF_PICKLE; only with stacks)
    bool html = true;   ///< <prefix>.html (GPUMEMPROF_HTML)
};

/// Every file of one dump: <prefix>.json, .txt, .folded, .alloc.folded (all or none), then
/// .pickle and .html (each whole or not at all). Each failure is one warning naming the file
/// and what is missing; GPUMEMPROF_LOG=info times each file. Returns true when every file asked
/// for was written. Never throws.
bool write_dump(const ReportInput& in, const StackReport& report, DumpFiles files) noexcept;

/// Writes <prefix>.json and, when the stack report is ready, <prefix>.txt, <prefix>.folded (bytes
/// live at the global peak) and <prefix>.alloc.folded (total bytes allocated): all or none
/// (util::commit_all). Returns false and sets *error on
/// failure (also when only the JSON could be written: the stack report failed); never throws.
bool write_all_reports(const ReportInput& in, const StackReport& report, std::string* error);

/// `data`'s stacks resolved with the process's symbolizer (under its lock): `stack_skip` as
/// GPUMEMPROF_STACK_SKIP (nullptr: the default), `python_mode` as ReportInput::python_frames.
ResolvedReport resolve_stacks(const stacks::ReportData& data, const char* stack_skip, int python_mode);

/// The symbolised stacks of the sites and OOMs of `report` into the trace (stack blocks, a few
/// thousand stacks at a time: never all in memory). Never throws.
void write_trace_stacks(const StackReport& report, trace::Writer& trace) noexcept;

} // namespace gpumemprof::report
