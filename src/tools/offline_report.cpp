// SPDX-License-Identifier: MIT
// `gpumemprof report` (see offline_report.hpp).
#include "tools/offline_report.hpp"

#include "pool/alloc_conf.hpp"
#include "pool/pool_model.hpp"
#include "report/html_report.hpp"
#include "report/text_report.hpp"
#include "stacks/site_table.hpp"
#include "stats/event_ring.hpp"
#include "stats/time_series.hpp"
#include "tools/replay.hpp"
#include "trace/reader.hpp"
#include "util/atomic_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>

namespace gpumemprof::tools {
namespace {

/// Symbols read from the trace: every frame of every stack gets its own pseudo-address.
class TableSymbolizer final : public report::Symbolizer {
public:
    std::uintptr_t add(const trace::StackFrame& f) {
        report::SymbolFrame s;
        s.function = f.function;
        s.file = f.file;
        s.line = static_cast<int>(f.line);
        s.module = f.module.empty() ? std::string("??") : f.module;
        s.offset = static_cast<decltype(s.offset)>(f.offset);
        s.python = f.kind == "python";
        frames_.push_back({std::move(s)});
        return frames_.size(); // 1-based: 0 is never an address
    }
    const std::vector<report::SymbolFrame>& resolve(std::uintptr_t ip) override {
        static const std::vector<report::SymbolFrame> unknown = {report::SymbolFrame{"", "", 0, "??"}};
        return ip >= 1 && ip <= frames_.size() ? frames_[ip - 1] : unknown;
    }

private:
    std::vector<std::vector<report::SymbolFrame>> frames_;
};

struct Device {
    stats::TimeSeries series;
    stats::EventRing ring;
    std::unique_ptr<pool::PoolModel> model;
    std::uint64_t pending_acquire = 0; ///< segment bytes not yet charged to a request
};

/// The trace's events fed, in their order, to the call-site table and to each device's time
/// series, event ring and PyTorch model, as the live library does.
/// The trace is read as it is fed (a window of kLookahead events, not the whole trace).
class EventFeed {
public:
    EventFeed(const trace::Header& h, const pool::AllocConf& conf) : conf_(conf), header_start_(h.start_time_ns) {
        for (const trace::DeviceInfo& d : h.devices)
            capacity_[d.ordinal] = d.total_bytes;
    }

    /// Feed the reader's events; false with *error for a bad trace (a truncated one is fed up to
    /// its last complete block when allowed, with *warning).
    bool run(trace::Reader& reader, bool allow_truncated, std::string* error, std::string* warning) {
        trace::Event e;
        while (reader.next(e)) {
            if (events_ == 0) {
                // Time zero: the recording's start (else its first event).
                t0_ = e.time_ns;
                if (header_start_ && header_start_ <= t0_)
                    t0_ = header_start_;
            }
            ++events_;
            last_time_ns_ = e.time_ns;
            window_.push_back(e);
            if (window_.size() == kLookahead) {
                feed();
                window_.pop_front();
            }
        }
        for (; !window_.empty(); window_.pop_front())
            feed();
        if (reader.failed()) {
            if (!allow_truncated || reader.error_kind() != trace::ReadError::truncated) {
                *error = reader.error();
                return false;
            }
            *warning = reader.error() + " (the complete blocks are reported)";
        }
        return true;
    }

    std::uint64_t events() const { return events_; }
    std::uint64_t last_time_ns() const { return last_time_ns_; }
    std::uint64_t t0() const { return t0_; }
    std::map<std::uint32_t, std::uint64_t>& capacity() { return capacity_; }
    stacks::SiteTable& table() { return table_; }
    std::map<std::uint32_t, Device>& devices() { return devices_; }
    std::vector<stacks::OomRecord>& ooms() { return ooms_; }
    std::vector<report::StepMark>& steps() { return steps_; }

private:
    Device& device(std::uint32_t ordinal) {
        auto [it, fresh] = devices_.try_emplace(ordinal);
        if (fresh)
            it->second.model = std::make_unique<pool::PoolModel>(conf_, static_cast<int>(ordinal), capacity_[ordinal]);
        return it->second;
    }

    /// The event at the window's front (the window holds the next ones).
    void feed() {
        const trace::Event& e = window_.front();
        const auto t = static_cast<std::int64_t>(e.time_ns - std::min(e.time_ns, t0_));
        stats::PoolEvent pe;
        pe.t_ns = t;
        pe.addr = e.ptr;
        pe.size = e.size;
        pe.block_size = e.block_size;
        pe.stream = e.stream;
        pe.site = static_cast<std::uint32_t>(e.stack_id);
        switch (e.type) {
        case trace::EventType::alloc:
        case trace::EventType::live_block: return on_alloc(e, pe);
        case trace::EventType::free_requested: return on_free_requested(e, pe);
        case trace::EventType::free_completed: {
            Device& d = device(e.device);
            d.series.add(t, stats::Series::waiting, -static_cast<std::int64_t>(e.block_size));
            pe.action = stats::PoolAction::free_completed;
            d.ring.push(pe);
            return;
        }
        case trace::EventType::segment_alloc: return on_segment_alloc(pe);
        case trace::EventType::segment_free: {
            Device& d = device(e.device);
            d.series.add(t, stats::Series::reserved, -static_cast<std::int64_t>(e.size));
            pe.action = stats::PoolAction::segment_free;
            d.ring.push(pe);
            return;
        }
        case trace::EventType::oom: return on_oom(e, pe);
        case trace::EventType::device_info: capacity_[e.device] = e.size; return;
        case trace::EventType::step: return on_step(e, t);
        case trace::EventType::vmm_map:
        case trace::EventType::vmm_unmap: return;   // pass-through memory: not the pool's
        case trace::EventType::empty_cache: return; // a mark, not memory
        }
    }

    void on_alloc(const trace::Event& e, stats::PoolEvent& pe) {
        Device& d = device(e.device);
        const int dev_no = static_cast<int>(e.device);
        // The library charges a segment to the request it was obtained for, before the block.
        if (d.pending_acquire) {
            table_.on_acquire(dev_no, d.pending_acquire, pe.site);
            d.pending_acquire = 0;
        }
        table_.on_alloc(dev_no, e.ptr, e.block_size, e.size, pe.site);
        d.model->on_alloc(e.ptr, e.size, e.stream);
        d.series.add(pe.t_ns, stats::Series::allocated, static_cast<std::int64_t>(e.block_size));
        d.series.set(pe.t_ns, stats::Series::model_reserved, static_cast<std::int64_t>(d.model->reserved_bytes()));
        pe.action = stats::PoolAction::alloc;
        d.ring.push(pe);
    }

    void on_free_requested(const trace::Event& e, stats::PoolEvent& pe) {
        Device& d = device(e.device);
        const auto block = static_cast<std::int64_t>(e.block_size);
        pe.site = table_.on_free(static_cast<int>(e.device), e.ptr);
        d.model->on_free(e.ptr);
        d.series.add(pe.t_ns, stats::Series::allocated, -block);
        d.series.add(pe.t_ns, stats::Series::waiting, block);
        d.series.set(pe.t_ns, stats::Series::model_reserved, static_cast<std::int64_t>(d.model->reserved_bytes()));
        pe.action = stats::PoolAction::free_requested;
        d.ring.push(pe);
    }

    void on_segment_alloc(stats::PoolEvent& pe) {
        const trace::Event& e = window_.front();
        Device& d = device(e.device);
        d.pending_acquire += e.size;
        d.series.add(pe.t_ns, stats::Series::reserved, static_cast<std::int64_t>(e.size));
        // The request it serves is the next allocation on this device (within the window).
        for (std::size_t j = 1; j < window_.size(); ++j)
            if (window_[j].device == e.device && window_[j].type == trace::EventType::alloc) {
                pe.site = static_cast<std::uint32_t>(window_[j].stack_id);
                break;
            }
        pe.action = stats::PoolAction::segment_alloc;
        d.ring.push(pe);
    }

    void on_step(const trace::Event& e, std::int64_t t) {
        report::StepMark m;
        m.step = static_cast<std::int64_t>(e.size);
        m.t_ns = t;
        for (auto& [ordinal, d] : devices_)
            m.devices.push_back({static_cast<int>(ordinal), d.series.current(stats::Series::allocated),
                                 d.series.current(stats::Series::reserved)});
        steps_.push_back(std::move(m));
    }

    void on_oom(const trace::Event& e, stats::PoolEvent& pe) {
        Device& d = device(e.device);
        d.series.mark(pe.t_ns, stats::MarkerKind::oom, static_cast<std::int64_t>(e.size));
        pe.action = stats::PoolAction::oom;
        pe.addr = e.device_free;
        d.ring.push(pe);
        stacks::OomRecord o;
        o.device = static_cast<int>(e.device);
        o.info.requested = e.size;
        o.info.rounded = e.block_size;
        o.info.allocation_size = e.block_size;
        o.info.device_free = e.device_free;
        o.info.largest_free_block = e.largest_free;
        o.info.device_total = capacity_[e.device];
        o.info.allocated = d.series.current(stats::Series::allocated);
        o.info.reserved = d.series.current(stats::Series::reserved);
        o.id = static_cast<stacks::StackId>(e.stack_id);
        ooms_.push_back(std::move(o));
    }

    /// An event and the 63 after it: where a segment_alloc looks for the request it serves.
    static constexpr std::size_t kLookahead = 64;

    const pool::AllocConf& conf_;
    std::uint64_t header_start_ = 0;
    std::deque<trace::Event> window_;
    std::uint64_t events_ = 0;
    std::uint64_t last_time_ns_ = 0;
    std::uint64_t t0_ = 0;
    std::map<std::uint32_t, std::uint64_t> capacity_;
    stacks::SiteTable table_;
    std::map<std::uint32_t, Device> devices_;
    std::vector<stacks::OomRecord> ooms_;
    std::vector<report::StepMark> steps_;
};

/// The recording process's rank fields, from the header metadata its library wrote.
util::RankInfo recorded_rank(const trace::Header& h) {
    util::RankInfo r;
    for (const auto& [key, value] : h.metadata) {
        int* number = key == "rank"         ? &r.rank
                      : key == "local_rank" ? &r.local_rank
                      : key == "world_size" ? &r.world_size
                                            : nullptr;
        if (number) {
            char* end = nullptr;
            const long v = std::strtol(value.c_str(), &end, 10);
            *number = !value.empty() && *end == '\0' && v >= -1 && v <= 0x7fffffffL ? static_cast<int>(v) : -1;
        } else if (key == "rank_from") {
            r.from = value;
        } else if (key == "cuda_visible_devices") {
            r.cuda_visible_devices = value;
        }
    }
    return r;
}

/// The pool's statistics per device: the trace replayed under its recorded settings (none when
/// it cannot be planned).
std::map<std::uint32_t, DeviceResult> replayed_stats(const std::string& trace_path, bool allow_truncated,
                                                     const pool::AllocConf& conf) {
    Plan plan;
    std::string plan_error;
    std::string plan_warning;
    std::map<std::uint32_t, DeviceResult> replayed;
    if (load_plan(trace_path, allow_truncated, &plan, &plan_error, &plan_warning)) {
        ReplayOptions ro;
        ro.conf = conf;
        // One summary per device: a device with several contexts shows its first one's pool.
        for (DeviceResult& r : replay(plan, ro))
            replayed.try_emplace(r.ordinal, r);
    }
    return replayed;
}

/// One device's summary: the replayed pool's figures, the model's and the history fed to it.
report::DeviceSummary device_summary(std::uint32_t ordinal, Device& d, std::uint64_t capacity,
                                     const std::map<std::uint32_t, DeviceResult>& replayed) {
    report::DeviceSummary s;
    s.device = static_cast<int>(ordinal);
    s.total_capacity = capacity;
    if (auto it = replayed.find(ordinal); it != replayed.end()) {
        s.stats = it->second.stats;
        s.at_reserved_peak = it->second.at_reserved_peak;
        if (!s.total_capacity)
            s.total_capacity = it->second.capacity;
    }
    s.has_model = true;
    s.model = d.model->stats();
    s.model_unserved = d.model->unserved();
    s.model_at_reserved_peak = d.model->reserved_peak();
    s.history.series = d.series.data();
    s.history.events = d.ring.events();
    s.history.events_overwritten = d.ring.overwritten();
    return s;
}

} // namespace

bool build_offline_report(const std::string& trace_path, bool allow_truncated, OfflineReport* out, std::string* error,
                          std::string* warning) {
    trace::Reader reader;
    if (!reader.open_file(trace_path)) {
        *error = reader.error();
        return false;
    }
    const trace::Header& h = reader.header();
    std::vector<std::string> conf_warnings;
    const pool::AllocConf conf = pool::parse_alloc_conf(h.alloc_conf, &conf_warnings);

    EventFeed feed(h, conf);
    if (!feed.run(reader, allow_truncated, error, warning))
        return false;

    // Frames by stack id (the stack blocks follow the events), as pseudo-addresses of the table
    // symbolizer.
    TableSymbolizer symbols;
    std::unordered_map<std::uint64_t, std::vector<std::uintptr_t>> frames_of;
    for (const trace::Stack& s : reader.stacks()) {
        std::vector<std::uintptr_t>& ips = frames_of[s.id];
        for (const trace::StackFrame& f : s.frames)
            ips.push_back(symbols.add(f));
    }
    out->named_stacks = frames_of.size();

    const std::map<std::uint32_t, DeviceResult> replayed = replayed_stats(trace_path, allow_truncated, conf);

    OfflineReport& o = *out;
    o.events = feed.events();
    o.in.pid = static_cast<int>(h.pid);
    o.in.exe = h.exe;
    o.in.host = h.host;
    o.in.rank = recorded_rank(h);
    o.in.start_time_ns = h.start_time_ns ? feed.t0() : 0; // the header names the wall clock
    o.in.steps = std::move(feed.steps());
    o.in.alloc_conf = h.alloc_conf;
    o.in.seconds_profiled = feed.events() == 0 ? 0 : static_cast<double>(feed.last_time_ns() - feed.t0()) / 1e9;
    for (auto& [ordinal, d] : feed.devices())
        o.in.devices.push_back(device_summary(ordinal, d, feed.capacity()[ordinal], replayed));
    stacks::ReportData& data = o.stacks.data;
    feed.table().collect(&data);
    for (stacks::SiteData& s : data.sites)
        if (auto it = frames_of.find(s.id); it != frames_of.end())
            s.frames = it->second;
    for (stacks::OomRecord& r : feed.ooms())
        if (auto it = frames_of.find(r.id); it != frames_of.end())
            r.frames = it->second;
    data.ooms = std::move(feed.ooms());
    // The frames are symbolised already and had the profiler's own dropped when recorded.
    o.stacks.resolved = report::resolve_report(data, symbols, {}, h.alloc_conf);
    o.stacks.ok = true;
    return true;
}

namespace {

const char* const kReportHelp =
    "usage: gpumemprof report TRACE [--html OUT] [--txt OUT] [--allow-truncated]\n"
    "\n"
    "Writes the HTML report (timeline, live-at-a-time, flame graph, line-profile tree, tables)\n"
    "and the text report of a GPUMEMPROF_TRACE recording, on any machine. Call sites are named by\n"
    "the stacks the recording program wrote into the trace at exit (trace version 2); a trace of\n"
    "version 1, or of a program that died, has none and its sites are shown without frames.\n"
    "\n"
    "options:\n"
    "  --html OUT         the HTML report's path (default: TRACE without its extension + .html)\n"
    "  --txt OUT          the text report's path (default: TRACE without its extension + .txt)\n"
    "  --allow-truncated  report the complete blocks of a trace that is cut inside a block\n";

std::string default_prefix(const std::string& trace) {
    const std::size_t slash = trace.find_last_of('/');
    const std::size_t dot = trace.find_last_of('.');
    return dot != std::string::npos && (slash == std::string::npos || dot > slash) ? trace.substr(0, dot) : trace;
}

} // namespace

int cmd_report(int argc, char** argv) {
    std::string trace, html, txt;
    bool allow_truncated = false;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kReportHelp, stdout);
            return 0;
        }
        if ((a == "--html" || a == "--txt") && i + 1 < argc) {
            (a == "--html" ? html : txt) = argv[++i];
        } else if (a == "--allow-truncated") {
            allow_truncated = true;
        } else if (!a.empty() && a[0] == '-') {
            std::fprintf(stderr, "gpumemprof report: unknown option or missing value '%s'\n%s", a.c_str(), kReportHelp);
            return 2;
        } else if (trace.empty()) {
            trace = a;
        } else {
            std::fprintf(stderr, "gpumemprof report: more than one TRACE given\n");
            return 2;
        }
    }
    if (trace.empty()) {
        std::fprintf(stderr, "gpumemprof report: TRACE is missing\n%s", kReportHelp);
        return 2;
    }
    if (html.empty())
        html = default_prefix(trace) + ".html";
    if (txt.empty())
        txt = default_prefix(trace) + ".txt";
    OfflineReport rep;
    std::string error, warning;
    if (!build_offline_report(trace, allow_truncated, &rep, &error, &warning)) {
        std::fprintf(stderr, "gpumemprof report: %s: %s\n", trace.c_str(), error.c_str());
        return 1;
    }
    if (!warning.empty())
        std::fprintf(stderr, "gpumemprof report: warning: %s\n", warning.c_str());
    rep.in.prefix = default_prefix(trace);
    const std::string page = report::html_report(rep.in, rep.stacks);
    const std::string text = report::text_report(rep.in, rep.stacks.data, rep.stacks.resolved);
    if (page.empty() || !util::write_file_atomic(html, page, &error) || !util::write_file_atomic(txt, text, &error)) {
        std::fprintf(stderr, "gpumemprof report: %s\n", error.empty() ? "building the report failed" : error.c_str());
        return 3;
    }
    std::printf("%s: %llu events, %zu call sites (%zu named by the trace's stacks)\nwrote %s (%zu bytes) and %s\n",
                trace.c_str(), static_cast<unsigned long long>(rep.events), rep.stacks.resolved.sites.size(),
                rep.named_stacks, html.c_str(), page.size(), txt.c_str());
    return 0;
}

} // namespace gpumemprof::tools
