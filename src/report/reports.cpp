// SPDX-License-Identifier: MIT
// Report entry points (see reports.hpp).
#include "report/reports.hpp"

#include "report/accounting_report.hpp"
#include "report/folded_writer.hpp"
#include "report/html_report.hpp"
#include "report/json_report.hpp"
#include "report/text_report.hpp"
#include "report/torch_snapshot.hpp"
#include "stacks/recorder.hpp"
#include "trace/format.hpp"
#include "trace/writer.hpp"
#include "util/atomic_file.hpp"
#include "util/log.hpp"
#include "util/swallowed.hpp"

#include <chrono>
#include <mutex>
#include <new>
#include <set>

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

/// `write` makes the file's content into it; false (with *error) when anything failed.
template <typename Write> bool make(util::AtomicFile& f, const std::string& path, Write write, std::string* error) {
    if (f.create(path) && write(f) && f.finish())
        return true;
    note(error, f.error().empty() ? "cannot write " + path : f.error());
    f.discard();
    return false;
}

/// The three stack reports into `files` (created here), finished, not yet renamed.
bool make_stack_reports(const ReportInput& in, const StackReport& report, util::AtomicFile (&files)[3],
                        std::string* error) {
    const ResolvedReport& r = report.resolved;
    return make(
               files[0], in.prefix + ".txt",
               [&](util::AtomicFile& f) { return write_text(f, in, report.data, r, accounting_text(in, report)); },
               error) &&
           make(
               files[1], in.prefix + ".folded",
               [&](util::AtomicFile& f) { return write_folded(f, r, FoldedMetric::peak_live_bytes); }, error) &&
           make(
               files[2], in.prefix + ".alloc.folded",
               [&](util::AtomicFile& f) { return write_folded(f, r, FoldedMetric::total_bytes); }, error);
}

std::string failure_text(const std::exception& e) {
    return dynamic_cast<const std::bad_alloc*>(&e) != nullptr ? "out of memory" : e.what();
}

} // namespace

bool write_all_reports(const ReportInput& in, const StackReport& report, std::string* error) {
    try {
        util::AtomicFile json, stack_files[3];
        if (!make(
                json, in.prefix + ".json", [&](util::AtomicFile& f) { return write_json(f, in, report); }, error))
            return false;
        std::vector<util::AtomicFile*> set = {&json};
        if (report.ok) {
            if (!make_stack_reports(in, report, stack_files, error))
                return false;
            set.insert(set.end(), {&stack_files[0], &stack_files[1], &stack_files[2]});
        }
        std::string err;
        if (!util::commit_all(set, &err)) {
            note(error, err);
            return false;
        }
        if (!report.ok)
            note(error, "the call stacks could not be resolved (" +
                            (report.failure.empty() ? std::string("an internal error") : report.failure) +
                            "): " + in.prefix +
                            ".json is written without call sites; its .txt, .folded and .alloc.folded are not");
        return report.ok;
    } catch (const std::exception& e) {
        note(error, "report failed: " + failure_text(e));
    } catch (...) {
        note(error, "report failed");
    }
    return false;
}

bool write_dump(const ReportInput& in, const StackReport& report, DumpFiles files) noexcept {
    try {
        using clock = std::chrono::steady_clock;
        auto ms_since = [](clock::time_point t0) {
            return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
        };
        bool ok = true;
        std::string error;
        auto t0 = clock::now();
        // All four files or none: a full disk must not leave a JSON beside an older .txt.
        if (write_all_reports(in, report, &error)) {
            log::info("wrote {}.json, .txt, .folded and .alloc.folded in {:.1f} ms", in.prefix, ms_since(t0));
        } else {
            ok = false;
            if (report.ok)
                log::warn("reports not written: {}", error);
            else // the JSON was written; say what is missing, and what the HTML lacks
                log::warn("{}{}", error, files.html ? "; the HTML report has no call sites" : std::string_view());
        }
        // Each on its own, whole or not at all, timed (GPUMEMPROF_LOG=info shows it).
        auto write_one = [&](const std::string& path, auto write) {
            t0 = clock::now();
            util::AtomicFile f;
            std::string err;
            if (make(f, path, write, &err) && f.commit()) {
                log::info("wrote {} ({} bytes) in {:.1f} ms", path, f.bytes(), ms_since(t0));
                return;
            }
            log::warn("could not write {}: {}", path, !f.error().empty() ? f.error() : err);
            ok = false;
        };
        if (files.pickle && report.ok)
            write_one(in.prefix + ".pickle", [&](util::AtomicFile& f) {
                return write_torch_snapshot_pickle(f, in, report.data, report.resolved);
            });
        if (files.html)
            write_one(in.prefix + ".html", [&](util::AtomicFile& f) { return write_html(f, in, report); });
        return ok;
    } catch (...) {
        return false;
    }
}

namespace {

constexpr std::size_t kReuseFrames = 12; ///< frames shown for the call that ended reuse at once

/// `report.data` filled in; resolves it into `report.resolved`.
void resolve_into(StackReport& report, const ReportInput& in, Symbolizer& symbolizer, const RawFrames& raw) {
    try {
        // The resolved report points into the data it was built from: ours.
        const PythonFrames python = in.python_frames == 2 ? PythonFrames::all : PythonFrames::merged;
        const std::vector<std::string> skip = skip_list(in);
        report.resolved = resolve_report(report.data, symbolizer, skip, in.alloc_conf, python, raw);
        if (in.reuse.lost_stack != 0)
            report.resolved.reuse_lost_where = stack_labels(stacks::Recorder::instance().frames(in.reuse.lost_stack),
                                                            symbolizer, skip, python, kReuseFrames);
        report.ok = true;
    } catch (const std::exception& e) {
        report.resolved = ResolvedReport{};
        report.ok = false;
        try {
            report.failure = failure_text(e);
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
    } catch (...) {
        report.resolved = ResolvedReport{};
        report.ok = false;
    }
}

} // namespace

ResolvedReport resolve_stacks(const stacks::ReportData& data, const char* stack_skip, int python_mode) {
    std::lock_guard<std::mutex> lock(symbolizer_mutex());
    return resolve_report(data, process_symbolizer(), parse_skip_list(stack_skip), std::string(),
                          python_mode == 2 ? PythonFrames::all : PythonFrames::merged);
}

StackReport prepare_stack_report(const ReportInput& in) {
    try {
        // Without the sites' frames: resolving reads them from the recorder one site at a time.
        return prepare_stack_report(in, stacks::Recorder::instance().collect(false));
    } catch (...) {
        return StackReport{};
    }
}

StackReport prepare_stack_report(const ReportInput& in, stacks::ReportData data) {
    StackReport report;
    try {
        report.data = std::move(data);
        std::lock_guard<std::mutex> lock(symbolizer_mutex());
        resolve_into(report, in, process_symbolizer(), [](stacks::StackId id, std::vector<std::uintptr_t>* out) {
            *out = stacks::Recorder::instance().frames(id);
        });
    } catch (const std::exception& e) {
        report.ok = false;
        try {
            report.failure = failure_text(e);
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
    } catch (...) {
        report.ok = false;
    }
    return report;
}

void write_trace_stacks(const StackReport& r, trace::Writer& trace) noexcept {
    try {
        if (!r.ok)
            return;
        const ResolvedReport& res = r.resolved;
        // Encoded straight into a block's payload, a block every few MiB.
        constexpr std::size_t kBlockBytes = 4u << 20;
        std::vector<std::uint8_t> payload;
        payload.reserve(kBlockBytes + (1u << 16));
        std::uint32_t count = 0;
        // Innermost first, as the trace keeps them; each id once (an OOM's may be a site's too).
        auto add = [&](stacks::StackId id, std::uint32_t stack) {
            trace::append_stack_head(payload, id, res.stacks.depth(stack));
            for (std::uint32_t n = stack; n != 0; n = res.stacks.parent(n)) {
                const SymbolFrame& f = res.frames[res.stacks.frame(n)];
                trace::append_stack_frame(payload, f.function, f.file, static_cast<std::uint32_t>(std::max(f.line, 0)),
                                          f.module, static_cast<std::uint64_t>(f.offset), f.python ? "python" : "");
            }
            if (++count, payload.size() >= kBlockBytes) {
                trace.write_stack_block(payload, count);
                payload.clear();
                count = 0;
            }
        };
        for (std::size_t i = 0; i < r.data.sites.size() && i < res.site_of.size(); ++i)
            if (r.data.sites[i].id != 0)
                add(r.data.sites[i].id, res.sites[res.site_of[i]].stack);
        std::set<stacks::StackId> oom_ids;
        for (const ResolvedOom& o : res.ooms)
            if (o.record && o.record->id != 0 && res.site_by_id(o.record->id) < 0 &&
                oom_ids.insert(o.record->id).second)
                add(o.record->id, o.stack);
        trace.write_stack_block(payload, count);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

} // namespace gpumemprof::report
