// SPDX-License-Identifier: MIT
// `gpumemprof diff` (see diff.hpp).
#include "tools/diff.hpp"

#include "trace/reader.hpp"
#include "util/byte_format.hpp"
#include "util/json_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace gpumemprof::tools {

DiffSide side_of_run(const RunSummary& run) {
    DiffSide s;
    s.label = run.file;
    s.peak_allocated = run.peak_allocated();
    s.peak_reserved = run.peak_reserved();
    s.has_sites = run.has_sites;
    for (const auto& [key, b] : run.sites)
        s.sites[key] = b;
    return s;
}

bool peak_grew(std::int64_t base, std::int64_t now, double pct) {
    // now > base * (1 + pct / 100), as now * 100 > base * (100 + pct): exact for whole percentages
    // (a long double holds 64-bit integers and their products by 100 exactly up to 2^57 bytes).
    return static_cast<long double>(now) * 100.0L > static_cast<long double>(base) * (100.0L + pct);
}

// ---- steps of a trace -----------------------------------------------------------------------

namespace {

/// A step's events: [begin, end) of the trace's events, from its mark to the next mark.
struct Window {
    std::size_t begin = 0, end = 0;
};

bool find_window(const std::vector<trace::Event>& events, std::int64_t step, Window* w) {
    for (std::size_t i = 0; i < events.size(); ++i)
        if (events[i].type == trace::EventType::step && static_cast<std::int64_t>(events[i].size) == step) {
            w->begin = i;
            w->end = events.size();
            for (std::size_t j = i + 1; j < events.size(); ++j)
                if (events[j].type == trace::EventType::step) {
                    w->end = j;
                    break;
                }
            return true;
        }
    return false;
}

/// The events replayed in order: live blocks and what each device holds.
struct Replay {
    struct Block {
        std::uint32_t device;
        std::uint64_t bytes;
        std::uint32_t site;
    };
    std::unordered_map<std::uint64_t, Block> live; ///< (device << 48) ^ ptr -> block
    std::map<std::uint32_t, std::int64_t> allocated, reserved;

    static std::uint64_t at(const trace::Event& e) { return (static_cast<std::uint64_t>(e.device) << 48) ^ e.ptr; }

    /// Applies event `e` (its block charged to `site`).
    void apply(const trace::Event& e, std::uint32_t site) {
        switch (e.type) {
        case trace::EventType::alloc:
        case trace::EventType::live_block:
            live[at(e)] = Block{e.device, e.block_size, site};
            allocated[e.device] += static_cast<std::int64_t>(e.block_size);
            break;
        case trace::EventType::free_requested: {
            auto it = live.find(at(e));
            if (it != live.end()) {
                allocated[e.device] -= static_cast<std::int64_t>(it->second.bytes);
                live.erase(it);
            }
            break;
        }
        case trace::EventType::segment_alloc:
        case trace::EventType::vmm_map: reserved[e.device] += static_cast<std::int64_t>(e.size); break;
        case trace::EventType::segment_free:
        case trace::EventType::vmm_unmap: reserved[e.device] -= static_cast<std::int64_t>(e.size); break;
        default: break;
        }
    }
};

bool read_trace(const std::string& path, std::vector<trace::Event>* events, std::vector<trace::Stack>* stacks,
                std::string* error) {
    trace::Reader r;
    if (!r.open_file(path)) {
        *error = r.error();
        return false;
    }
    trace::Event ev;
    while (r.next(ev))
        events->push_back(ev);
    if (r.failed()) {
        *error = r.error();
        return false;
    }
    *stacks = r.stacks();
    return true;
}

} // namespace

bool steps_of_trace(const std::string& path, const SiteKeys& keys, std::int64_t a, std::int64_t b, DiffSide* sa,
                    DiffSide* sb, std::string* error) {
    std::vector<trace::Event> events;
    std::vector<trace::Stack> stacks;
    if (!read_trace(path, &events, &stacks, error))
        return false;
    // Stack id -> site id; site id -> key.
    std::vector<std::string> names{"(no stack)"};
    std::unordered_map<std::uint64_t, std::uint32_t> site_of;
    {
        std::unordered_map<std::string, std::uint32_t> ids{{names[0], 0}};
        for (const trace::Stack& s : stacks) {
            std::vector<report::SymbolFrame> frames;
            for (const trace::StackFrame& f : s.frames)
                frames.push_back({f.function, f.file, static_cast<int>(f.line), f.module.empty() ? "??" : f.module,
                                  static_cast<std::uintptr_t>(f.offset), f.kind == "python"});
            std::vector<const report::SymbolFrame*> ptrs; // innermost first, as the trace keeps them
            for (const report::SymbolFrame& f : frames)
                ptrs.push_back(&f);
            const std::string key = keys.site_key(nullptr, ptrs);
            auto [it, fresh] = ids.try_emplace(key, static_cast<std::uint32_t>(names.size()));
            if (fresh)
                names.push_back(key);
            site_of[s.id] = it->second;
        }
    }
    auto site = [&](const trace::Event& e) -> std::uint32_t {
        auto it = site_of.find(e.stack_id);
        return it != site_of.end() ? it->second : 0;
    };
    const struct {
        std::int64_t step;
        DiffSide* side;
    } wanted[] = {{a, sa}, {b, sb}};
    for (const auto& w : wanted) {
        Window win;
        if (!find_window(events, w.step, &win)) {
            *error = "step " + std::to_string(w.step) + " is not marked in the trace (gpumemprof_mark_step)";
            return false;
        }
        // Pass 1: each device's most allocated and reserved within the step, and when.
        Replay r;
        std::map<std::uint32_t, std::int64_t> max_alloc, max_res;
        std::map<std::uint32_t, std::size_t> max_at;
        std::vector<std::int64_t> total(names.size(), 0);
        std::int64_t at_start = 0;
        for (std::size_t i = 0; i < win.end; ++i) {
            const trace::Event& e = events[i];
            r.apply(e, site(e));
            if (i == win.begin) {
                for (const auto& [dev, v] : r.allocated) {
                    max_alloc[dev] = v;
                    max_at[dev] = i;
                    at_start = std::max(at_start, v);
                }
                for (const auto& [dev, v] : r.reserved)
                    max_res[dev] = v;
            }
            if (i < win.begin)
                continue;
            if (e.type == trace::EventType::alloc)
                total[site(e)] += static_cast<std::int64_t>(e.block_size);
            if (r.allocated[e.device] > max_alloc[e.device]) {
                max_alloc[e.device] = r.allocated[e.device];
                max_at[e.device] = i;
            }
            max_res[e.device] = std::max(max_res[e.device], r.reserved[e.device]);
        }
        std::uint32_t peak_dev = 0;
        std::int64_t peak = -1;
        for (const auto& [dev, v] : max_alloc)
            if (v > peak) {
                peak = v;
                peak_dev = dev;
            }
        DiffSide& s = *w.side;
        s.label = "step " + std::to_string(w.step);
        s.peak_allocated = std::max<std::int64_t>(peak, 0);
        for (const auto& [dev, v] : max_res)
            s.peak_reserved = std::max(s.peak_reserved, v);
        s.allocated_at_start = at_start;
        s.has_sites = !stacks.empty();
        // Pass 2: the sites' live bytes on that device at that moment.
        if (peak >= 0) {
            Replay r2;
            for (std::size_t i = 0; i <= max_at[peak_dev]; ++i)
                r2.apply(events[i], site(events[i]));
            std::vector<std::int64_t> live(names.size(), 0);
            for (const auto& [k, blk] : r2.live)
                if (blk.device == peak_dev)
                    live[blk.site] += static_cast<std::int64_t>(blk.bytes);
            for (std::size_t i = 0; i < names.size(); ++i)
                if (live[i] || total[i])
                    s.sites[names[i]] = SiteBytes{live[i], total[i]};
        }
    }
    return true;
}

// ---- steps of a report ------------------------------------------------------------------------

bool steps_of_report(const RunSummary& run, std::int64_t a, std::int64_t b, DiffSide* sa, DiffSide* sb,
                     std::string* error) {
    std::vector<StepRun> steps = run.steps;
    std::stable_sort(steps.begin(), steps.end(), [](const StepRun& x, const StepRun& y) { return x.t_ns < y.t_ns; });
    const struct {
        std::int64_t step;
        DiffSide* side;
    } wanted[] = {{a, sa}, {b, sb}};
    for (const auto& w : wanted) {
        auto it = std::find_if(steps.begin(), steps.end(), [&](const StepRun& s) { return s.step == w.step; });
        if (it == steps.end()) {
            *error = "step " + std::to_string(w.step) + " is not among the report's steps" +
                     (steps.empty() ? " (it has none: mark them with gpumemprof_mark_step)" : "");
            return false;
        }
        const std::int64_t begin = it->t_ns;
        const std::int64_t end = it + 1 != steps.end() ? (it + 1)->t_ns : INT64_MAX;
        DiffSide& s = *w.side;
        s.label = "step " + std::to_string(w.step);
        s.exact = true;
        s.allocated_at_start = 0;
        for (const StepDeviceRun& d : it->devices)
            s.allocated_at_start = std::max(s.allocated_at_start, d.allocated);
        for (const DeviceRun& d : run.devices) {
            // The points overlapping [begin, end): each holds the most of its span.
            for (std::size_t i = 0; i < d.timeline.size(); ++i) {
                const std::int64_t p0 = d.timeline[i].t_ns;
                const std::int64_t p1 = i + 1 < d.timeline.size() ? d.timeline[i + 1].t_ns : INT64_MAX;
                if (p1 <= begin || p0 >= end)
                    continue;
                s.peak_allocated = std::max(s.peak_allocated, d.timeline[i].allocated);
                s.peak_reserved = std::max(s.peak_reserved, d.timeline[i].reserved);
            }
            if (d.points_cover_ns > 0)
                s.exact = false;
        }
        for (const StepDeviceRun& d : it->devices) // held at the mark, whatever the points say
            s.peak_allocated = std::max(s.peak_allocated, d.allocated);
    }
    return true;
}

// ---- the command ------------------------------------------------------------------------------

namespace {

constexpr int kExitOk = 0;
constexpr int kExitGrew = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInput = 4;

const char* const kDiffHelp =
    "usage: gpumemprof diff BASE NEW [--json] [--top N] [--fail-if-peak-grows PCT]\n"
    "       gpumemprof diff FILE --steps A B [--json] [--top N] [--fail-if-peak-grows PCT]\n"
    "\n"
    "Compares two runs (JSON reports or traces) by call site, not by address: the peak allocated\n"
    "and reserved bytes of each and the delta, and the sites whose bytes at the peak and whose\n"
    "total bytes changed most (a site is its user line: the innermost frame that is not allocator\n"
    "or dispatch plumbing). With --steps, compares steps A and B of one run (marked with\n"
    "gpumemprof_mark_step / gpumemprof.mark_step): from a trace exactly, sites included; from a\n"
    "JSON report, the peaks from its timeline.\n"
    "\n"
    "options:\n"
    "  --json                    print {\"peak_allocated\": {\"base\", \"new\", \"delta\"}, \"peak_reserved\":\n"
    "                            {...}, \"sites\": [{\"site\", \"base\", \"new\", \"delta\", \"total\": {...}}]}\n"
    "  --top N                   sites to show (default 20, 0 = all that changed)\n"
    "  --fail-if-peak-grows PCT  exit 1 when NEW's peak allocated exceeds BASE's by more than PCT\n"
    "                            percent (a CI memory gate), else 0\n"
    "  --steps A B               compare steps A (base) and B (new) of one FILE\n"
    "  -h, --help                this text\n"
    "\n"
    "exit status: 0 done (and within the gate), 1 the peak grew by more than PCT, 2 bad arguments,\n"
    "             3 out of memory, 4 an input is unreadable or not a report or trace\n";

int usage(const std::string& msg) {
    std::fprintf(stderr, "gpumemprof diff: %s\n(see gpumemprof diff --help)\n", msg.c_str());
    return kExitUsage;
}

struct SiteDelta {
    std::string site;
    SiteBytes base, now;
    std::int64_t peak_delta() const { return now.at_peak - base.at_peak; }
    std::int64_t total_delta() const { return now.total - base.total; }
};

std::vector<SiteDelta> site_deltas(const DiffSide& base, const DiffSide& now) {
    std::vector<SiteDelta> out;
    auto b = base.sites.begin(), n = now.sites.begin();
    while (b != base.sites.end() || n != now.sites.end()) {
        SiteDelta d;
        if (n == now.sites.end() || (b != base.sites.end() && b->first < n->first)) {
            d.site = b->first;
            d.base = (b++)->second;
        } else if (b == base.sites.end() || n->first < b->first) {
            d.site = n->first;
            d.now = (n++)->second;
        } else {
            d.site = b->first;
            d.base = (b++)->second;
            d.now = (n++)->second;
        }
        if (d.peak_delta() || d.total_delta())
            out.push_back(std::move(d));
    }
    return out;
}

std::vector<SiteDelta> ranked(std::vector<SiteDelta> v, bool by_total, std::size_t top) {
    auto mag = [&](const SiteDelta& d) {
        const std::int64_t x = by_total ? d.total_delta() : d.peak_delta();
        return x < 0 ? -x : x;
    };
    std::stable_sort(v.begin(), v.end(), [&](const SiteDelta& a, const SiteDelta& b) { return mag(a) > mag(b); });
    v.erase(std::remove_if(v.begin(), v.end(), [&](const SiteDelta& d) { return mag(d) == 0; }), v.end());
    if (top && v.size() > top)
        v.resize(top);
    return v;
}

std::string signed_iec(std::int64_t v) {
    return (v > 0 ? "+" : v < 0 ? "-" : "") + util::iec_size(v < 0 ? -v : v);
}

std::string percent(std::int64_t base, std::int64_t now) {
    if (base == 0)
        return now == 0 ? "0%" : "new";
    char b[32];
    std::snprintf(b, sizeof b, "%+.1f%%", 100.0 * static_cast<double>(now - base) / static_cast<double>(base));
    return b;
}

void json_pair(util::JsonWriter& w, const char* name, std::int64_t base, std::int64_t now) {
    w.key(name).begin_object();
    w.field("base", base);
    w.field("new", now);
    w.field("delta", now - base);
    w.end_object();
}

void print_json(const DiffSide& base, const DiffSide& now, const std::vector<SiteDelta>& all, std::size_t top,
                const double* gate, bool grew) {
    util::JsonWriter w;
    w.begin_object();
    w.field("base", base.label);
    w.field("new", now.label);
    json_pair(w, "peak_allocated", base.peak_allocated, now.peak_allocated);
    json_pair(w, "peak_reserved", base.peak_reserved, now.peak_reserved);
    if (base.allocated_at_start >= 0)
        json_pair(w, "allocated_at_start", base.allocated_at_start, now.allocated_at_start);
    w.field("exact", base.exact && now.exact);
    w.field("has_sites", base.has_sites && now.has_sites);
    auto sites = [&](const char* name, bool by_total) {
        w.key(name).begin_array();
        for (const SiteDelta& d : ranked(all, by_total, top)) {
            w.begin_object();
            w.field("site", d.site);
            w.field("base", d.base.at_peak);
            w.field("new", d.now.at_peak);
            w.field("delta", d.peak_delta());
            json_pair(w, "total", d.base.total, d.now.total);
            w.end_object();
        }
        w.end_array();
    };
    sites("sites", false);
    sites("sites_by_total", true);
    if (gate) {
        w.key("gate").begin_object();
        w.field("fail_if_peak_grows_pct", *gate);
        w.field("failed", grew);
        w.end_object();
    }
    w.end_object();
    std::printf("%s\n", w.str().c_str());
}

void print_text(const DiffSide& base, const DiffSide& now, const std::vector<SiteDelta>& all, std::size_t top) {
    std::printf("base: %s\nnew:  %s\n\n", base.label.c_str(), now.label.c_str());
    auto row = [](const char* name, std::int64_t b, std::int64_t n) {
        std::printf("%-20s %14s -> %14s  %14s (%s)\n", name, util::iec_size(b).c_str(), util::iec_size(n).c_str(),
                    signed_iec(n - b).c_str(), percent(b, n).c_str());
    };
    row("peak allocated", base.peak_allocated, now.peak_allocated);
    row("peak reserved", base.peak_reserved, now.peak_reserved);
    if (base.allocated_at_start >= 0)
        row("allocated at start", base.allocated_at_start, now.allocated_at_start);
    if (!base.exact || !now.exact)
        std::printf("(peaks from timeline points: the most within each point's span)\n");
    if (!base.has_sites || !now.has_sites) {
        std::printf("\nno call sites to compare (%s)\n", base.allocated_at_start >= 0
                                                             ? "a JSON report's steps carry no sites: diff the trace"
                                                             : "a report without stacks: GPUMEMPROF_STACK_DEPTH was 0");
        return;
    }
    for (const bool by_total : {false, true}) {
        std::printf("\nsites whose %s changed most:\n", by_total ? "total bytes" : "bytes at the peak");
        const auto v = ranked(all, by_total, top);
        if (v.empty())
            std::printf("  none\n");
        for (const SiteDelta& d : v) {
            const SiteBytes& b = d.base;
            const SiteBytes& n = d.now;
            std::printf("  %14s  %12s -> %12s  %s\n", signed_iec(by_total ? d.total_delta() : d.peak_delta()).c_str(),
                        util::iec_size(by_total ? b.total : b.at_peak).c_str(),
                        util::iec_size(by_total ? n.total : n.at_peak).c_str(), d.site.c_str());
        }
    }
}

bool parse_step(const char* s, std::int64_t* out) {
    if (!s || !*s)
        return false;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s, &end, 10);
    if (errno || *end || v < 0)
        return false;
    *out = v;
    return true;
}

} // namespace

int cmd_diff(int argc, char** argv) {
    std::vector<std::string> files;
    bool json = false, steps = false;
    std::int64_t step_a = 0, step_b = 0;
    double gate_pct = 0;
    bool gate = false;
    std::size_t top = 20;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kDiffHelp, stdout);
            return kExitOk;
        } else if (a == "--json") {
            json = true;
        } else if (a == "--fail-if-peak-grows") {
            const char* v = i + 1 < argc ? argv[++i] : "";
            char* end = nullptr;
            errno = 0;
            gate_pct = std::strtod(v, &end);
            if (!*v || *end || errno || !std::isfinite(gate_pct) || gate_pct < 0)
                return usage("--fail-if-peak-grows needs a percentage (a number >= 0)");
            gate = true;
        } else if (a == "--steps") {
            if (i + 2 >= argc || !parse_step(argv[i + 1], &step_a) || !parse_step(argv[i + 2], &step_b))
                return usage("--steps needs two step numbers");
            i += 2;
            steps = true;
        } else if (a == "--top") {
            const char* v = i + 1 < argc ? argv[++i] : "";
            char* end = nullptr;
            const unsigned long long n = std::strtoull(v, &end, 10);
            if (!*v || *end || v[0] == '-' || n > (1u << 30))
                return usage("--top needs a number");
            top = static_cast<std::size_t>(n);
        } else if (!a.empty() && a[0] == '-') {
            return usage("unknown option '" + a + "'");
        } else {
            files.push_back(a);
        }
    }
    if (files.size() != (steps ? 1u : 2u))
        return usage(steps ? "--steps compares two steps of one FILE" : "BASE and NEW are needed (two files)");

    SiteKeys keys;
    DiffSide base, now;
    std::string error;
    if (steps) {
        InputKind kind;
        bool ok = input_kind(files[0], &kind, &error);
        if (ok && kind == InputKind::trace) {
            ok = steps_of_trace(files[0], keys, step_a, step_b, &base, &now, &error);
        } else if (ok) {
            RunSummary run;
            ok = read_run(files[0], keys, &run, &error) && steps_of_report(run, step_a, step_b, &base, &now, &error);
        }
        if (!ok) {
            std::fprintf(stderr, "gpumemprof diff: %s: %s\n", files[0].c_str(), error.c_str());
            return kExitInput;
        }
    } else {
        for (int k = 0; k < 2; ++k) {
            RunSummary run;
            if (!read_run(files[static_cast<std::size_t>(k)], keys, &run, &error)) {
                std::fprintf(stderr, "gpumemprof diff: %s: %s\n", files[static_cast<std::size_t>(k)].c_str(),
                             error.c_str());
                return kExitInput;
            }
            (k == 0 ? base : now) = side_of_run(run);
        }
    }
    const std::vector<SiteDelta> all = site_deltas(base, now);
    const bool grew = gate && peak_grew(base.peak_allocated, now.peak_allocated, gate_pct);
    if (json)
        print_json(base, now, all, top, gate ? &gate_pct : nullptr, grew);
    else
        print_text(base, now, all, top);
    if (gate && !json)
        std::printf("\ngate: peak allocated %s %s (%s), limit +%g%%: %s\n",
                    signed_iec(now.peak_allocated - base.peak_allocated).c_str(),
                    grew ? "grew past the limit" : "within the limit",
                    percent(base.peak_allocated, now.peak_allocated).c_str(), gate_pct, grew ? "FAIL" : "ok");
    return grew ? kExitGrew : kExitOk;
}

} // namespace gpumemprof::tools
