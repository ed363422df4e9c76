// SPDX-License-Identifier: MIT
// The HTML report's data (see html_report.hpp). Layout of the JSON, read by html/report.js:
//   frames:  [[function, file, line, module, hidden, "python"?], ...]   every distinct frame once
//   sites:   [[frame indices root first], live, total, total_count, acquired, peak_live,
//             peak_acquired, live_count, peak_live_count]                       merged call sites
//   devices: [{device, context, capacity, memory_stats, at_reserved_peak, model?, series,
//              markers, peak, events, live_end}]
//   ooms, capture, meta
// Times are nanoseconds since the process started.
#include "report/html_report.hpp"

#include "report/device_json.hpp"
#include "report/frame_filter.hpp"
#include "report/html_template.hpp"
#include "report/oom_advice.hpp"
#include "util/json_writer.hpp"
#include "util/options.hpp"

#include <cstdlib>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace gpumemprof::report {
namespace {

class FrameTable {
public:
    explicit FrameTable(const FrameFilter& filter) : filter_(filter) {}
    std::size_t index(const SymbolFrame& f) {
        std::string key = f.function;
        key += '\0';
        key += f.file;
        key += '\0';
        key += std::to_string(f.line);
        key += '\0';
        key += f.module;
        key += f.python ? "\1" : "";
        auto [it, fresh] = index_.emplace(std::move(key), frames_.size());
        if (fresh)
            frames_.push_back(&f);
        return it->second;
    }
    void write(util::JsonWriter& w) const {
        w.key("frames").begin_array();
        for (const SymbolFrame* f : frames_) {
            w.begin_array();
            w.value(f->function).value(f->file).value(f->line).value(f->module).value(filter_.hidden(*f) ? 1 : 0);
            if (f->python)
                w.value("python");
            w.end_array();
        }
        w.end_array();
    }

private:
    const FrameFilter& filter_;
    std::unordered_map<std::string, std::size_t> index_;
    std::vector<const SymbolFrame*> frames_;
};

void write_frames(util::JsonWriter& w, FrameTable& table, const std::vector<SymbolFrame>& frames) {
    w.begin_array();
    for (const SymbolFrame& f : frames)
        w.value(static_cast<std::uint64_t>(table.index(f)));
    w.end_array();
}

void write_series(util::JsonWriter& w, const stats::SeriesData& s) {
    w.key("series").begin_object();
    w.field("bucket_ns", s.bucket_ns);
    w.field("changes", s.changes);
    auto column = [&](const char* name, auto get) {
        w.key(name).begin_array();
        for (const stats::SeriesBucket& b : s.buckets)
            w.value(get(b));
        w.end_array();
    };
    column("t0", [](const stats::SeriesBucket& b) { return b.t0_ns; });
    column("t1", [](const stats::SeriesBucket& b) { return b.t1_ns; });
    for (int k = 0; k < stats::kSeriesCount; ++k) {
        w.key(stats::kSeriesNames[k]).begin_object();
        column("min", [k](const stats::SeriesBucket& b) { return b.min[k]; });
        column("max", [k](const stats::SeriesBucket& b) { return b.max[k]; });
        column("last", [k](const stats::SeriesBucket& b) { return b.last[k]; });
        w.end_object();
    }
    w.end_object();
    w.key("peak").begin_object();
    w.field("allocated", s.peak_allocated);
    w.field("allocated_t", s.peak_allocated_t_ns);
    w.field("reserved", s.peak_reserved);
    w.field("reserved_t", s.peak_reserved_t_ns);
    w.end_object();
    w.key("markers").begin_array();
    for (const stats::SeriesMarker& m : s.markers) {
        w.begin_array();
        w.value(m.kind == stats::MarkerKind::oom ? "oom" : "empty_cache").value(m.t_ns).value(m.bytes);
        w.end_array();
    }
    w.end_array();
    w.field("markers_dropped", s.markers_dropped);
}

/// StackId -> index of the merged site (+1; 0: no site).
std::unordered_map<stacks::StackId, std::size_t> site_numbers(const StackReport& r) {
    std::unordered_map<stacks::StackId, std::size_t> out;
    for (std::size_t i = 0; i < r.data.sites.size() && i < r.resolved.site_of.size(); ++i)
        out.emplace(r.data.sites[i].id, r.resolved.site_of[i] + 1);
    return out;
}

void write_device(util::JsonWriter& w, const DeviceSummary& d, std::size_t context,
                  const std::unordered_map<stacks::StackId, std::size_t>& sites, const StackReport& r) {
    auto site_of = [&](stacks::StackId id) -> std::uint64_t {
        auto it = sites.find(id);
        return it != sites.end() ? it->second : 0;
    };
    w.begin_object();
    w.field("device", d.device);
    w.field("context", static_cast<std::uint64_t>(context));
    w.field("capacity", static_cast<std::uint64_t>(d.total_capacity));
    w.key("memory_stats").raw(stats::to_json(d.stats));
    write_reserved_peak(w, d.at_reserved_peak);
    if (d.has_model)
        write_model(w, "model", d);
    write_series(w, d.history.series);
    // The latest events (the live-at-a-time view replays them backwards from live_end).
    const auto& ev = d.history.events;
    w.key("events").begin_object();
    w.field("overwritten", d.history.events_overwritten);
    auto column = [&](const char* name, auto get) {
        w.key(name).begin_array();
        for (const stats::PoolEvent& e : ev)
            w.value(get(e));
        w.end_array();
    };
    column("t", [](const stats::PoolEvent& e) { return e.t_ns; });
    column("action", [](const stats::PoolEvent& e) { return static_cast<int>(e.action); });
    column("bytes", [](const stats::PoolEvent& e) { return e.block_size; });
    column("site", [&](const stats::PoolEvent& e) { return site_of(e.site); });
    w.end_object();
    // Bytes live now per site in this pool (pass-through allocations are not pool events).
    std::unordered_set<std::uint64_t> in_pool;
    for (const pool::SegmentInfo& s : d.history.segments)
        for (const pool::BlockInfo& b : s.blocks)
            if (b.state == pool::BlockState::active_allocated)
                in_pool.insert(b.address);
    std::map<std::uint64_t, std::int64_t> live_end;
    for (const stacks::LiveBlock& b : r.data.live_blocks)
        if (b.device == d.device && (!d.history.segments_known || in_pool.count(b.ptr)))
            live_end[site_of(b.id)] += static_cast<std::int64_t>(b.size);
    w.key("live_end").begin_array();
    for (const auto& [site, bytes] : live_end) {
        w.begin_array();
        w.value(site).value(bytes);
        w.end_array();
    }
    w.end_array();
    w.end_object();
}

} // namespace

std::string html_data_json(const ReportInput& in, const StackReport& r) {
    util::JsonWriter w;
    const FrameFilter filter(in.hide_frames ? in.hide_frames->c_str() : nullptr);
    FrameTable table(filter);
    w.begin_object();
    w.field("format", 1);
    w.key("meta").begin_object();
    w.field("exe", in.exe);
    w.field("pid", static_cast<std::int64_t>(in.pid));
    w.field("host", util::host_name());
    w.field("seconds_profiled", in.seconds_profiled);
    w.field("alloc_conf", in.alloc_conf);
    w.field("stacks", r.ok);
    w.end_object();

    const ResolvedReport& res = r.resolved;
    w.key("sites").begin_array();
    for (const ResolvedSite& s : res.sites) {
        const stacks::SiteCounters& c = s.counters;
        w.begin_array();
        write_frames(w, table, s.frames);
        w.value(c.live_bytes).value(c.total_bytes).value(c.total_count).value(c.acquired_bytes);
        w.value(c.peak_live_bytes).value(c.peak_acquired_bytes).value(c.live_count).value(c.peak_live_count);
        w.end_array();
    }
    w.end_array();
    w.key("peak").begin_object();
    w.field("bytes", r.data.peak_bytes);
    w.end_object();

    const auto sites = site_numbers(r);
    w.key("devices").begin_array();
    std::map<int, std::size_t> contexts;
    for (const DeviceSummary& d : in.devices)
        write_device(w, d, contexts[d.device]++, sites, r);
    w.end_array();

    w.key("ooms").begin_array();
    for (const ResolvedOom& o : res.ooms) {
        if (!o.record)
            continue;
        w.begin_object();
        w.field("device", o.record->device);
        w.field("requested", static_cast<std::uint64_t>(o.record->info.requested));
        w.field("message", oom_message(o.record->device, o.record->info));
        w.field("suggestion", o.suggestion);
        w.key("frames");
        write_frames(w, table, o.frames);
        w.end_object();
    }
    w.end_array();

    const stacks::CaptureStats& c = r.data.capture;
    w.key("capture").begin_object();
    w.field("captures", c.captures);
    w.field("frames", c.frames);
    w.field("cache_hits", c.cache_hits);
    w.field("unwind_seconds", c.unwind_seconds);
    w.field("intern_seconds", c.intern_seconds);
    w.field("unique_sites", static_cast<std::uint64_t>(r.data.sites.size()));
    w.field("events", r.data.events);
    w.end_object();
    table.write(w);
    w.end_object();
    return w.take();
}

std::string html_report(const ReportInput& in, const StackReport& report) {
    try {
        std::string json = html_data_json(in, report);
        // Inside <script>, "</" could close the element: JSON allows "\/" for "/".
        std::string page(kHtmlHead);
        page.reserve(page.size() + json.size() + sizeof kHtmlTail);
        for (std::size_t i = 0; i < json.size(); ++i) {
            if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
                page += "<\\/";
                ++i;
            } else {
                page += json[i];
            }
        }
        page += kHtmlTail;
        return page;
    } catch (...) {
        return {};
    }
}

} // namespace gpumemprof::report
