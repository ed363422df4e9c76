// SPDX-License-Identifier: MIT
// Report entry points (see reports.hpp).
#include "report/reports.hpp"

#include "report/accounting_report.hpp"

#include "report/folded_writer.hpp"
#include "report/json_report.hpp"
#include "report/json_sections.hpp"
#include "report/text_report.hpp"
#include "stacks/recorder.hpp"
#include "util/atomic_file.hpp"

#include <mutex>

namespace gpumemprof::report {

namespace {

std::mutex& symbolizer_mutex() {
    static auto* m = new std::mutex();
    return *m;
}

/// One per process, leaked: its cache makes each address resolve once across the .txt, the
/// folded files, the JSON and repeated on-demand dumps. Use under symbolizer_mutex().
ProcessSymbolizer& process_symbolizer() {
    static auto* s = new ProcessSymbolizer();
    return *s;
}

std::vector<std::string> skip_list(const ReportInput& in) {
    return parse_skip_list(in.stack_skip ? in.stack_skip->c_str() : nullptr);
}

void note(std::string* error, const std::string& msg) {
    if (error == nullptr)
        return;
    if (!error->empty())
        *error += "; ";
    *error += msg;
}

} // namespace

std::vector<std::pair<std::string, std::string>> report_files(const ReportInput& in, const StackReport& report) {
    const ResolvedReport& r = report.resolved;
    return {
        {in.prefix + ".txt", text_report(in, report.data, r, accounting_text(in, report))},
        {in.prefix + ".folded", folded_stacks(r, FoldedMetric::peak_live_bytes)},
        {in.prefix + ".alloc.folded", folded_stacks(r, FoldedMetric::total_bytes)},
    };
}

bool write_reports(const ReportInput& in, const StackReport& report, std::string* error) {
    if (!report.ok) {
        note(error, "stack report failed");
        return false;
    }
    try {
        std::string err;
        if (util::write_files_atomic(report_files(in, report), &err))
            return true;
        note(error, err);
        return false;
    } catch (const std::exception& e) {
        note(error, std::string("stack report failed: ") + e.what());
    } catch (...) {
        note(error, "stack report failed");
    }
    return false;
}

bool write_all_reports(const ReportInput& in, const StackReport& report, std::string* error) {
    try {
        std::vector<std::pair<std::string, std::string>> files;
        files.emplace_back(in.prefix + ".json", json_report(in, report));
        if (report.ok) {
            for (auto& f : report_files(in, report))
                files.push_back(std::move(f));
        } else {
            note(error, "the stack report failed: only the JSON is written");
        }
        std::string err;
        if (util::write_files_atomic(files, &err))
            return report.ok;
        note(error, err);
    } catch (const std::exception& e) {
        note(error, std::string("report failed: ") + e.what());
    } catch (...) {
        note(error, "report failed");
    }
    return false;
}

bool write_json_report(const ReportInput& in, const StackReport& report, std::string* error) {
    try {
        std::string err;
        if (util::write_file_atomic(in.prefix + ".json", json_report(in, report), &err))
            return true;
        note(error, err.empty() ? "cannot write " + in.prefix + ".json" : err);
    } catch (const std::exception& e) {
        note(error, std::string("JSON report failed: ") + e.what());
    } catch (...) {
        note(error, "JSON report failed");
    }
    return false;
}

namespace {

constexpr std::size_t kReuseFrames = 12; ///< frames shown for the call that ended reuse at once

StackReport resolve(const ReportInput& in, const stacks::ReportData& data, Symbolizer& symbolizer) {
    StackReport report;
    try {
        report.data = data;
        // The resolved report points into the data it was built from: build it from our copy.
        const PythonFrames python = in.python_frames == 2 ? PythonFrames::all : PythonFrames::merged;
        const std::vector<std::string> skip = skip_list(in);
        report.resolved = resolve_report(report.data, symbolizer, skip, in.alloc_conf, python);
        if (in.reuse.lost_stack != 0)
            report.resolved.reuse_lost_where = stack_labels(stacks::Recorder::instance().frames(in.reuse.lost_stack),
                                                            symbolizer, skip, python, kReuseFrames);
        report.ok = true;
    } catch (...) {
        report.ok = false;
    }
    return report;
}

} // namespace

ResolvedReport resolve_stacks(const stacks::ReportData& data, const char* stack_skip, int python_mode) {
    std::lock_guard<std::mutex> lock(symbolizer_mutex());
    return resolve_report(data, process_symbolizer(), parse_skip_list(stack_skip), std::string(),
                          python_mode == 2 ? PythonFrames::all : PythonFrames::merged);
}

StackReport prepare_stack_report(const ReportInput& in) {
    try {
        return prepare_stack_report(in, stacks::Recorder::instance().collect());
    } catch (...) {
        return StackReport{};
    }
}

StackReport prepare_stack_report(const ReportInput& in, const stacks::ReportData& data) {
    try {
        std::lock_guard<std::mutex> lock(symbolizer_mutex());
        return resolve(in, data, process_symbolizer());
    } catch (...) {
        return StackReport{};
    }
}

bool write_reports(const ReportInput& in, const stacks::ReportData& data, Symbolizer& symbolizer, std::string* error) {
    return write_reports(in, resolve(in, data, symbolizer), error);
}

void append_json(util::JsonWriter& w, const ReportInput& in, const stacks::ReportData& data, Symbolizer& symbolizer) {
    // Everything that can fail (symbolisation) happens before the first key is written.
    const StackReport report = resolve(in, data, symbolizer);
    if (report.ok)
        json_sections(w, in, report.data, report.resolved);
}

} // namespace gpumemprof::report
