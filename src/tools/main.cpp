// SPDX-License-Identifier: MIT
// The gpumemprof command-line tool: `gpumemprof replay TRACE ...` (what-if replays and sweeps).
#include "config.h"
#include "pool/alloc_conf.hpp"
#include "stats/device_stats.hpp"
#include "tools/diff.hpp"
#include "tools/merge.hpp"
#include "tools/offline_report.hpp"
#include "tools/replay.hpp"
#include "tools/sweep.hpp"
#include "util/byte_format.hpp"
#include "util/json_writer.hpp"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace gpumemprof::tools {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitTrace = 1;    // unreadable, truncated, corrupt trace
constexpr int kExitUsage = 2;    // bad arguments, bad --conf
constexpr int kExitInternal = 3; // out of host memory, or a bug

const char* const kMainHelp =
    "usage: gpumemprof <command> [options]\n"
    "\n"
    "commands:\n"
    "  replay TRACE     replay a GPUMEMPROF_TRACE recording (or a converted PyTorch snapshot)\n"
    "                   through gpumemprof's PyTorch-policy pool on a simulated device, with any\n"
    "                   allocator settings; --sweep tries a grid of settings and ranks them\n"
    "  report TRACE     write the HTML and text reports of a GPUMEMPROF_TRACE recording\n"
    "  merge FILE...    the reports (or traces) of many ranks as one job: per-rank peaks, imbalance,\n"
    "                   the sites that differ most, the first OOM\n"
    "  diff BASE NEW    two runs (or two steps of one) compared by call site; a CI memory gate\n"
    "\n"
    "  gpumemprof replay --help     options of replay\n"
    "  gpumemprof report --help     options of report\n"
    "  gpumemprof merge --help      options of merge\n"
    "  gpumemprof diff --help       options of diff\n"
    "  gpumemprof --version\n";

const char* const kReplayHelp =
    "usage: gpumemprof replay TRACE [--conf SETTINGS] [--capacity SIZE] [--json]\n"
    "       gpumemprof replay TRACE --sweep [--capacity SIZE] [--jobs N] [--top N] [--json]\n"
    "\n"
    "Replays the allocation and free requests of TRACE (all devices; blocks live before the\n"
    "recording started come first) and prints peak allocated / reserved / requested bytes,\n"
    "fragmentation, segments, device alloc/free calls, OOMs and retries per device. A request\n"
    "that runs out of memory fails and the replay goes on; its free is skipped and counted.\n"
    "\n"
    "options:\n"
    "  --conf SETTINGS   allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax, e.g.\n"
    "                    \"max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4]\";\n"
    "                    --conf \"\" means PyTorch's defaults. Default: the settings recorded in\n"
    "                    the trace. An invalid value is an error (exit 2).\n"
    "  --capacity SIZE   memory of each simulated device: bytes, or with a K, M, G, T suffix\n"
    "                    (powers of 1024: 80G = 80 GiB). Default: recorded in the trace, else 80G.\n"
    "  --json            print JSON: {\"devices\":[{\"device\":D,\"memory_stats\":{...}}, ...], ...}\n"
    "                    with torch.cuda.memory_stats() keys\n"
    "  --no-cache        replay without caching (every request its own segment), for reference\n"
    "  --allow-truncated replay the complete blocks of a trace that is cut inside a block\n"
    "  --sweep           replay under a grid of settings (max_split_size_mb, roundup_power2_divisions,\n"
    "                    max_non_split_rounding_mb, expandable_segments, and\n"
    "                    garbage_collection_threshold when the capacity is known) and print\n"
    "                    them ranked: fewest OOMs, then lowest peak\n"
    "                    reserved, then fewest device allocations; the best comes first, followed\n"
    "                    by the PYTORCH_CUDA_ALLOC_CONF / GPUMEMPROF_ALLOC_CONF line to use\n"
    "  --jobs N          sweep threads (default: all cores)\n"
    "  --top N           sweep rows to print (default 20, 0 = all)\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 done, 1 unreadable/truncated/corrupt trace, 2 bad arguments or settings,\n"
    "             3 out of memory or internal error\n";

struct Args {
    std::string trace;
    bool have_conf = false;
    std::string conf;
    std::uint64_t capacity = 0;
    bool json = false;
    bool sweep = false;
    bool no_cache = false;
    bool allow_truncated = false;
    unsigned jobs = 0;
    std::size_t top = 20;
};

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "gpumemprof replay: %s\n(see gpumemprof replay --help)\n", msg.c_str());
    return kExitUsage;
}

bool parse_uint(const char* s, std::uint64_t max, std::uint64_t* out) {
    if (!s || !*s)
        return false;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-' || v > max)
        return false;
    *out = v;
    return true;
}

void print_device_text(const PlanDevice& pd, const DeviceResult& r) {
    const auto& s = r.stats;
    const std::int64_t reserved = s.reserved_bytes[stats::kAll].peak;
    const std::int64_t allocated = s.allocated_bytes[stats::kAll].peak;
    // A context other than 0 is named (trace version 3: each context of a device has its pool).
    const std::string context = r.context != 0 ? ", context " + std::to_string(r.context) : std::string();
    std::printf("device %u%s (simulated capacity %s)\n", r.ordinal, context.c_str(),
                util::iec_size(static_cast<std::int64_t>(r.capacity)).c_str());
    auto row = [](const char* name, std::int64_t v) {
        std::printf("  %-28s %12s  (%" PRId64 " B)\n", name, util::iec_size(v).c_str(), v);
    };
    row("peak allocated", allocated);
    row("peak reserved", reserved);
    row("peak requested", s.requested_bytes[stats::kAll].peak);
    row("fragmentation (res - alloc)", reserved - allocated);
    row("peak inactive split bytes", s.inactive_split_bytes[stats::kAll].peak);
    std::printf("  %-28s %12" PRId64 "  (peak %" PRId64 ")\n", "segments now", s.segment[stats::kAll].current,
                s.segment[stats::kAll].peak);
    std::printf("  %-28s %12" PRId64 " / %" PRId64 "\n", "device alloc / free calls", s.num_device_alloc,
                s.num_device_free);
    std::printf("  %-28s %12" PRIu64 "\n", "alloc requests", r.allocs);
    std::printf("  %-28s %12" PRId64 "  (alloc retries %" PRId64 ", frees skipped %" PRIu64 ")\n", "OOMs", s.num_ooms,
                s.num_alloc_retries, r.skipped_frees);
    const Recorded& rec = pd.recorded;
    // Without a known starting point (blocks live before recording, no baseline) the recorded
    // segment events only give growth, not a peak to compare with.
    if ((rec.segment_allocs || rec.ooms) && (rec.baseline_known || pd.live_blocks == 0))
        std::printf("  %-28s %12s  (%" PRIu64 " segment allocs, %" PRIu64 " OOMs in the trace)\n",
                    "recorded peak reserved", util::iec_size(rec.reserved_peak).c_str(), rec.segment_allocs, rec.ooms);
}

std::string conf_or_defaults(const std::string& label) {
    return label.empty() ? "(PyTorch defaults)" : label;
}

/// The settings to replay with: --conf (must be valid), else those recorded in the trace
/// (their warnings only noted). False when --conf is invalid (the warnings are printed).
bool choose_conf(const Args& a, const Plan& plan, pool::AllocConf* conf) {
    std::vector<std::string> warnings;
    *conf = pool::parse_alloc_conf(a.have_conf ? a.conf : plan.header.alloc_conf, &warnings);
    for (const auto& w : warnings)
        std::fprintf(stderr, "gpumemprof replay: %s%s\n", a.have_conf ? "--conf: " : "recorded settings: ", w.c_str());
    return warnings.empty() || !a.have_conf;
}

/// The capacity of the simulated devices is given (--capacity) or recorded in the trace.
bool capacity_known(const Args& a, const Plan& plan) {
    if (a.capacity != 0)
        return true;
    for (const auto& d : plan.devices)
        if (d.recorded_capacity)
            return true;
    return false;
}

/// The sweep's progress on stderr: after the first second, on one line on a terminal, else a
/// line every 10 s.
class SweepProgress {
public:
    SweepProgress() : tty_(::isatty(2) != 0), t0_(std::chrono::steady_clock::now()) {}

    void operator()(std::size_t done, std::size_t total) {
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        if (el < 1.0)
            return;
        const double left = done ? el / static_cast<double>(done) * static_cast<double>(total - done) : 0;
        std::fprintf(stderr, "%ssweep: %zu/%zu settings replayed, %.1f s elapsed, ~%.0f s left%s", tty_ ? "\r" : "",
                     done, total, el, left, tty_ ? "   " : "\n");
        std::fflush(stderr);
        printed_ = true;
    }
    double every_s() const { return tty_ ? 0.25 : 10.0; }
    /// Ends the terminal line, if one was written.
    void finish() const {
        if (printed_ && tty_)
            std::fputc('\n', stderr);
    }

private:
    bool tty_;
    std::chrono::steady_clock::time_point t0_;
    bool printed_ = false;
};

/// A finished sweep: the grid ranked best first, the defaults' totals and the no-cache reference.
struct SweepOutcome {
    std::vector<SweepEntry> grid;
    Totals defaults;
    Totals nocache;
};

SweepOutcome sweep_ranked(const Args& a, const Plan& plan) {
    SweepOutcome out;
    out.grid = sweep_grid(plan, capacity_known(a, plan), plan.header.alloc_conf);
    SweepProgress progress;
    run_sweep(plan, out.grid, a.capacity, a.jobs, std::ref(progress), progress.every_s());
    progress.finish();
    // The no-cache reference, outside the ranking (it always reserves least and calls most).
    ReplayOptions nc;
    nc.mode = pool::Mode::passthrough;
    nc.capacity = a.capacity;
    out.nocache = totals(replay(plan, nc));
    rank(out.grid);
    for (const auto& e : out.grid)
        if (e.label.empty())
            out.defaults = e.totals;
    return out;
}

void write_sweep_entry(util::JsonWriter& w, std::size_t rank, const SweepEntry& e) {
    w.begin_object();
    w.field("rank", static_cast<std::uint64_t>(rank));
    w.field("conf", e.label);
    w.field("recorded", e.recorded);
    w.field("reserved_bytes_peak", e.totals.reserved_peak);
    w.field("allocated_bytes_peak", e.totals.allocated_peak);
    w.field("requested_bytes_peak", e.totals.requested_peak);
    w.field("inactive_split_bytes_peak", e.totals.inactive_split_bytes_peak);
    w.field("num_ooms", e.totals.ooms);
    w.field("num_device_alloc", e.totals.device_allocs);
    w.field("num_device_free", e.totals.device_frees);
    w.field("num_alloc_retries", e.totals.retries);
    w.end_object();
}

void print_sweep_json(const Args& a, const Plan& plan, const SweepOutcome& s) {
    util::JsonWriter w;
    w.begin_object();
    w.field("trace", a.trace);
    w.field("events", plan.events);
    w.field("settings_tried", static_cast<std::uint64_t>(s.grid.size()));
    w.key("results").begin_array();
    for (std::size_t i = 0; i < s.grid.size(); ++i)
        write_sweep_entry(w, i + 1, s.grid[i]);
    w.end_array();
    w.key("no_cache").begin_object();
    w.field("reserved_bytes_peak", s.nocache.reserved_peak);
    w.field("num_device_alloc", s.nocache.device_allocs);
    w.end_object();
    w.field("recommended", s.grid.front().label);
    w.end_object();
    std::printf("%s\n", w.str().c_str());
}

/// The best settings as the lines to use, with their gain over the defaults.
void print_recommendation(const SweepEntry& best, const Totals& defaults) {
    if (best.label.empty()) {
        std::printf("recommended: PyTorch's defaults (no PYTORCH_CUDA_ALLOC_CONF / GPUMEMPROF_ALLOC_CONF needed)\n");
        return;
    }
    const double gain = defaults.reserved_peak
                            ? 100.0 * static_cast<double>(defaults.reserved_peak - best.totals.reserved_peak) /
                                  static_cast<double>(defaults.reserved_peak)
                            : 0.0;
    std::printf("recommended: PYTORCH_CUDA_ALLOC_CONF=%s\n", best.label.c_str());
    std::printf("             GPUMEMPROF_ALLOC_CONF=%s\n", best.label.c_str());
    std::printf("             (peak reserved %s vs %s with the defaults, %.1f%% less; OOMs %" PRId64 " vs %" PRId64
                ")\n",
                util::iec_size(best.totals.reserved_peak).c_str(), util::iec_size(defaults.reserved_peak).c_str(), gain,
                best.totals.ooms, defaults.ooms);
}

/// The ranking as a table (the first --top rows and the recorded settings), then the advice.
void print_sweep_text(const Args& a, const SweepOutcome& s) {
    std::printf("%4s  %14s  %14s  %14s  %6s  %10s  %7s  %s\n", "rank", "peak reserved", "peak allocated",
                "fragmentation", "OOMs", "dev allocs", "retries", "settings");
    const std::size_t rows = a.top == 0 ? s.grid.size() : std::min(a.top, s.grid.size());
    for (std::size_t i = 0; i < s.grid.size(); ++i) {
        const auto& e = s.grid[i];
        if (i >= rows && !e.recorded)
            continue;
        const Totals& t = e.totals;
        std::printf("%4zu  %14s  %14s  %14s  %6" PRId64 "  %10" PRId64 "  %7" PRId64 "  %s%s\n", i + 1,
                    util::iec_size(t.reserved_peak).c_str(), util::iec_size(t.allocated_peak).c_str(),
                    util::iec_size(t.reserved_peak - t.allocated_peak).c_str(), t.ooms, t.device_allocs, t.retries,
                    conf_or_defaults(e.label).c_str(), e.recorded ? "  <- recorded" : "");
    }
    std::printf("(%zu settings replayed; no caching at all would reserve %s at peak with %" PRId64 " device allocs)\n",
                s.grid.size(), util::iec_size(s.nocache.reserved_peak).c_str(), s.nocache.device_allocs);
    print_recommendation(s.grid.front(), s.defaults);
}

void write_replay_device(util::JsonWriter& w, const DeviceResult& r, const PlanDevice& pd) {
    const Recorded& rec = pd.recorded;
    w.begin_object();
    w.field("device", r.ordinal);
    w.field("context", r.context);
    w.field("capacity", r.capacity);
    w.key("memory_stats").raw(stats::to_json(r.stats));
    w.key("replay").begin_object();
    w.field("alloc_requests", r.allocs);
    w.field("failed_allocs", r.failed_allocs);
    w.field("skipped_frees", r.skipped_frees);
    w.field("address_mismatches", r.address_mismatches);
    if (r.address_mismatches > 0) {
        const auto& m = r.first_mismatch;
        w.key("first_mismatch").begin_object();
        w.field("alloc_index", m.alloc_index);
        w.field("requested", m.requested);
        w.field("rounded", m.rounded);
        w.field("recorded_ptr", m.recorded_ptr);
        w.field("replayed_ptr", m.replayed_ptr);
        w.end_object();
    }
    w.end_object();
    w.key("recorded").begin_object();
    if (rec.baseline_known || pd.live_blocks == 0)
        w.field("reserved_bytes_peak", rec.reserved_peak);
    else
        w.key("reserved_bytes_peak").null();
    w.field("requested_bytes_peak", rec.requested_peak);
    w.field("segment_allocs", rec.segment_allocs);
    w.field("segment_frees", rec.segment_frees);
    w.field("ooms", rec.ooms);
    w.end_object();
    w.end_object();
}

void print_replay_json(const Args& a, const Plan& plan, const std::vector<DeviceResult>& results,
                       const std::string& label) {
    util::JsonWriter w;
    w.begin_object();
    w.field("trace", a.trace);
    w.field("events", plan.events);
    w.field("complete", plan.complete);
    w.field("conf", label);
    w.field("mode", a.no_cache ? "no_cache" : "caching");
    w.field("live_blocks", plan.live_blocks);
    w.field("unmatched_frees", plan.unmatched_frees);
    w.key("devices").begin_array();
    for (std::size_t i = 0; i < results.size(); ++i)
        write_replay_device(w, results[i], plan.devices[i]);
    w.end_array();
    w.end_object();
    std::printf("%s\n", w.str().c_str());
}

void print_replay_text(const Args& a, const Plan& plan, const std::vector<DeviceResult>& results,
                       const std::string& label) {
    std::printf("trace: %s (%" PRIu64 " events, %zu device%s%s)\n", a.trace.c_str(), plan.events, plan.devices.size(),
                plan.devices.size() == 1 ? "" : "s",
                plan.complete ? "" : "; no end record: the recording program did not close it");
    std::printf("settings: %s%s%s\n", a.no_cache ? "no caching" : conf_or_defaults(label).c_str(),
                a.have_conf ? "" : " (as recorded)", "");
    if (plan.live_blocks || plan.unmatched_frees || plan.realloc_of_live)
        std::printf("note: %" PRIu64 " blocks live before recording replayed first; %" PRIu64
                    " frees without an allocation skipped; %" PRIu64 " allocations of a still-live address\n",
                    plan.live_blocks, plan.unmatched_frees, plan.realloc_of_live);
    for (std::size_t i = 0; i < results.size(); ++i)
        print_device_text(plan.devices[i], results[i]);
    if (results.size() > 1) {
        const Totals t = totals(results);
        std::printf("all devices: peak reserved %s, peak allocated %s, OOMs %" PRId64 "\n",
                    util::iec_size(t.reserved_peak).c_str(), util::iec_size(t.allocated_peak).c_str(), t.ooms);
    }
}

int run_replay(const Args& a) {
    Plan plan;
    std::string error;
    std::string warning;
    if (!load_plan(a.trace, a.allow_truncated, &plan, &error, &warning)) {
        std::fprintf(stderr, "gpumemprof replay: %s\n", error.c_str());
        return kExitTrace;
    }
    if (!warning.empty())
        std::fprintf(stderr, "gpumemprof replay: warning: %s\n", warning.c_str());
    pool::AllocConf conf;
    if (!choose_conf(a, plan, &conf))
        return kExitUsage;
    if (a.sweep) {
        const SweepOutcome s = sweep_ranked(a, plan);
        if (a.json)
            print_sweep_json(a, plan, s);
        else
            print_sweep_text(a, s);
        return kExitOk;
    }
    ReplayOptions opt;
    opt.conf = conf;
    opt.capacity = a.capacity;
    opt.mode = a.no_cache ? pool::Mode::passthrough : pool::Mode::caching;
    const std::vector<DeviceResult> results = replay(plan, opt);
    const std::string label = pool::format_alloc_conf(conf);
    if (a.json)
        print_replay_json(a, plan, results, label);
    else
        print_replay_text(a, plan, results, label);
    return kExitOk;
}

int cmd_replay(int argc, char** argv) {
    Args a;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        auto need = [&](const char*) -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (arg == "-h" || arg == "--help") {
            std::fputs(kReplayHelp, stdout);
            return kExitOk;
        } else if (arg == "--conf" || arg.rfind("--conf=", 0) == 0) {
            const char* v = arg == "--conf" ? need("--conf") : argv[i] + 7;
            if (!v)
                return usage_error("--conf needs a value");
            a.have_conf = true;
            a.conf = v;
        } else if (arg == "--capacity" || arg.rfind("--capacity=", 0) == 0) {
            const char* v = arg == "--capacity" ? need("--capacity") : argv[i] + 11;
            if (!v)
                return usage_error("--capacity needs a value");
            if (!util::parse_size(v, &a.capacity) || a.capacity == 0)
                return usage_error(std::string("--capacity '") + v +
                                   "' is not a size (bytes, or a number with K, M, G or T)");
        } else if (arg == "--jobs" || arg == "-j") {
            std::uint64_t n = 0;
            if (!parse_uint(need("--jobs"), 4096, &n) || n == 0)
                return usage_error("--jobs needs a number from 1 to 4096");
            a.jobs = static_cast<unsigned>(n);
        } else if (arg == "--top") {
            std::uint64_t n = 0;
            if (!parse_uint(need("--top"), 1u << 30, &n))
                return usage_error("--top needs a number");
            a.top = static_cast<std::size_t>(n);
        } else if (arg == "--json") {
            a.json = true;
        } else if (arg == "--sweep") {
            a.sweep = true;
        } else if (arg == "--no-cache") {
            a.no_cache = true;
        } else if (arg == "--allow-truncated") {
            a.allow_truncated = true;
        } else if (!arg.empty() && arg[0] == '-') {
            return usage_error("unknown option '" + arg + "'");
        } else if (a.trace.empty()) {
            a.trace = arg;
        } else {
            return usage_error("more than one TRACE given ('" + a.trace + "', '" + arg + "')");
        }
    }
    if (a.trace.empty())
        return usage_error("TRACE is missing");
    if (a.sweep && (a.have_conf || a.no_cache))
        return usage_error("--sweep chooses the settings; drop --conf/--no-cache");
    return run_replay(a);
}

} // namespace
} // namespace gpumemprof::tools

int main(int argc, char** argv) {
    using namespace gpumemprof::tools;
    if (argc < 2) {
        std::fputs(kMainHelp, stderr);
        return kExitUsage;
    }
    const std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
        std::fputs(kMainHelp, stdout);
        return kExitOk;
    }
    if (cmd == "--version") {
        std::printf("gpumemprof %s\n", GPUMEMPROF_VERSION);
        return kExitOk;
    }
    if (cmd == "replay") {
        // Nothing may escape as a crash: running out of memory (or a bug) is exit status 3.
        try {
            return cmd_replay(argc - 2, argv + 2);
        } catch (const std::bad_alloc&) {
            std::fprintf(stderr, "gpumemprof replay: out of memory\n");
        } catch (const std::exception& e) {
            std::fprintf(stderr, "gpumemprof replay: internal error: %s\n", e.what());
        }
        return kExitInternal;
    }
    const struct {
        const char* name;
        int (*run)(int, char**);
    } commands[] = {{"report", cmd_report}, {"merge", cmd_merge}, {"diff", cmd_diff}};
    for (const auto& c : commands) {
        if (cmd != c.name)
            continue;
        try {
            return c.run(argc - 2, argv + 2);
        } catch (const std::bad_alloc&) {
            std::fprintf(stderr, "gpumemprof %s: out of memory\n", c.name);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "gpumemprof %s: internal error: %s\n", c.name, e.what());
        }
        return kExitInternal;
    }
    std::fprintf(stderr, "gpumemprof: unknown command '%s'\n%s", cmd.c_str(), kMainHelp);
    return kExitUsage;
}
