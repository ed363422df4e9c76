// SPDX-License-Identifier: MIT
// The HTML report's data (see html_report.hpp). Layout of the JSON, read by html/report.js:
//   frames:  [[function, file, line, module, hidden, "python"?], ...]   every distinct frame once
//   sites:   [[frame indices root first], live, total, total_count, acquired, peak_live,
//             peak_acquired, live_count, peak_live_count, owner, user, kind]    merged call sites
//            (owner: the library that keeps the site's blocks, "" for the program: owner.hpp;
//            user: the frame of the innermost line of the user's own code, -1: none, user_code.hpp;
//            kind: its kind of memory, or whose memory it is: site_kind_labels)
//   devices: [{device, context, capacity, memory_stats, at_reserved_peak, model?, series,
//              markers, peak, events, live_end, kinds?}]
//            kinds: {names, t, bytes: [[bytes of kind k at each t], ...], changes, slot_ns}
//            (PyTorch's live blocks by kind of memory over time)
//   accounting: [{device, total, t, used, names, bytes: [[bucket b at each t], ...]}]
//            (the driver's used figure split into buckets at each reading)
//   ooms: [{device, requested, message, suggestion, frames, accounting?: {used, total,
//           buckets: [[name, bytes], ...], unexplained}, kinds?: [[name, bytes], ...]}]
//   capture, meta
// Times are nanoseconds since the process started.
#include "report/html_report.hpp"

#include "report/accounting_report.hpp"
#include "report/device_json.hpp"
#include "report/frame_filter.hpp"
#include "report/html_template.hpp"
#include "report/oom_advice.hpp"
#include "report/owner.hpp"
#include "report/site_kinds.hpp"
#include "report/user_code.hpp"
#include "util/json_writer.hpp"
#include "util/options.hpp"

#include <cstdlib>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace gpumemprof::report {
namespace {

/// The page's frames: the report's frames with equal function, file, line, module and kind
/// (the offset is not shown) as one, in order of first use.
class PageFrames {
public:
    PageFrames(const ResolvedReport& r, const FrameFilter& filter)
        : r_(r), filter_(filter), page_of_(r.frames.size(), kUnset) {}

    std::uint32_t index(std::uint32_t frame) {
        if (page_of_[frame] != kUnset)
            return page_of_[frame];
        const SymbolFrame& f = r_.frames[frame];
        std::string key = f.function;
        key += '\0';
        key += f.file;
        key += '\0';
        key += std::to_string(f.line);
        key += '\0';
        key += f.module;
        key += f.python ? "\1" : "";
        auto [it, fresh] = index_.emplace(std::move(key), static_cast<std::uint32_t>(frames_.size()));
        if (fresh)
            frames_.push_back(&f);
        page_of_[frame] = it->second;
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
    static constexpr std::uint32_t kUnset = 0xFFFFFFFFu;
    const ResolvedReport& r_;
    const FrameFilter& filter_;
    std::vector<std::uint32_t> page_of_; // report frame -> page frame
    std::unordered_map<std::string, std::uint32_t> index_;
    std::vector<const SymbolFrame*> frames_;
};

void write_frames(util::JsonWriter& w, PageFrames& table, const ResolvedReport& r, std::uint32_t stack,
                  std::vector<std::uint32_t>& buf) {
    r.stacks.frames(stack, &buf);
    w.begin_array();
    for (std::uint32_t f : buf)
        w.value(static_cast<std::uint64_t>(table.index(f)));
    w.end_array();
}

/// Inside <script>, "</" could close the element: JSON allows "\/" for "/". Streams through
/// `out`, a '<' at the end of one piece held until the next shows what follows it.
class ScriptSafeSink final : public util::OutputSink {
public:
    explicit ScriptSafeSink(util::OutputSink& out) : out_(out) {}
    bool write(std::string_view data) override {
        buf_.clear();
        if (pending_lt_) {
            buf_ += !data.empty() && data[0] == '/' ? "<\\" : "<";
            pending_lt_ = false;
        }
        for (std::size_t i = 0; i < data.size(); ++i) {
            if (data[i] == '<' && i + 1 == data.size()) {
                pending_lt_ = true;
                break;
            }
            buf_ += data[i];
            if (data[i] == '<' && data[i + 1] == '/')
                buf_ += '\\';
        }
        return out_.write(buf_);
    }
    bool finish() {
        const bool ok = !pending_lt_ || out_.write("<");
        pending_lt_ = false;
        return ok;
    }

private:
    util::OutputSink& out_;
    std::string buf_;
    bool pending_lt_ = false;
};

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

void write_kinds(util::JsonWriter& w, const DeviceSummary& d);

void write_device(util::JsonWriter& w, const DeviceSummary& d, std::size_t context, const StackReport& r) {
    // StackId -> index of the merged site + 1 (0: no site).
    auto site_of = [&](stacks::StackId id) -> std::uint64_t {
        return static_cast<std::uint64_t>(r.resolved.site_by_id(id) + 1);
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
    if (!d.kind_t_ns.empty())
        write_kinds(w, d);
    w.end_object();
}

void write_kinds(util::JsonWriter& w, const DeviceSummary& d) {
    w.key("kinds").begin_object();
    w.key("names").begin_array();
    for (const auto& k : d.kinds_at_peak)
        w.value(k.first);
    w.end_array();
    w.key("t").begin_array();
    for (std::int64_t t : d.kind_t_ns)
        w.value(t);
    w.end_array();
    w.key("bytes").begin_array();
    for (std::size_t k = 0; k < d.kinds_at_peak.size(); ++k) {
        w.begin_array();
        for (const std::vector<std::int64_t>& p : d.kind_points)
            w.value(k < p.size() ? p[k] : 0);
        w.end_array();
    }
    w.end_array();
    w.field("changes", d.kind_changes);
    w.field("slot_ns", d.kind_slot_ns);
    w.end_object();
}

void write_accounting(util::JsonWriter& w, const DeviceAccountingSummary& a) {
    w.begin_object();
    w.field("device", a.device);
    w.field("total", a.has_peak ? a.peak.driver_total : 0);
    auto column = [&](const char* name, auto get) {
        w.key(name).begin_array();
        for (const AccountingMoment& m : a.history)
            w.value(get(m));
        w.end_array();
    };
    column("t", [](const AccountingMoment& m) { return m.t_ns; });
    column("used", [](const AccountingMoment& m) { return m.driver_used; });
    const AccountingColumns c = accounting_columns(a.history);
    w.key("names").begin_array();
    for (const std::string& n : c.names)
        w.value(n);
    w.end_array();
    w.key("bytes").begin_array();
    for (const std::vector<std::int64_t>& col : c.columns) {
        w.begin_array();
        for (std::int64_t v : col)
            w.value(v);
        w.end_array();
    }
    w.end_array();
    w.end_object();
}

void write_oom_split(util::JsonWriter& w, const OomSplit& s) {
    if (s.has_accounting) {
        const AccountingMoment& m = s.accounting;
        w.key("accounting").begin_object();
        w.field("used", m.driver_used);
        w.field("total", m.driver_total);
        w.key("buckets").begin_array();
        for (const auto& [name, bytes] : m.buckets) {
            w.begin_array();
            w.value(name).value(bytes);
            w.end_array();
        }
        w.end_array();
        w.field("unexplained", m.unexplained());
        w.end_object();
    }
    if (!s.kinds.empty()) {
        w.key("kinds").begin_array();
        for (const auto& [name, bytes] : s.kinds) {
            w.begin_array();
            w.value(name).value(bytes);
            w.end_array();
        }
        w.end_array();
    }
}

} // namespace

bool write_html_data(util::OutputSink& out, const ReportInput& in, const StackReport& r) {
    util::JsonWriter w(&out);
    const FrameFilter filter(in.hide_frames ? in.hide_frames->c_str() : nullptr);
    PageFrames table(r.resolved, filter);
    std::vector<std::uint32_t> buf;
    w.begin_object();
    w.field("format", 1);
    w.key("meta").begin_object();
    w.field("exe", in.exe);
    w.field("pid", static_cast<std::int64_t>(in.pid));
    w.field("host", util::host_name());
    w.field("seconds_profiled", in.seconds_profiled);
    w.field("mid_run", in.mid_run);
    w.field("alloc_conf", in.alloc_conf);
    w.field("stacks", r.ok);
    w.end_object();

    const ResolvedReport& res = r.resolved;
    const UserCode user(in.exe, in.user_code);
    const std::vector<const DeviceSummary::SiteKind*> kinds = site_kinds(in, res);
    const std::vector<std::string> owners = site_owners(in, res, kinds);
    const std::vector<std::string> kind_labels = site_kind_labels(in, res, kinds, owners);
    w.key("sites").begin_array();
    for (const ResolvedSite& s : res.sites) {
        const stacks::SiteCounters& c = s.counters();
        w.begin_array();
        write_frames(w, table, res, s.stack, buf);
        w.value(c.live_bytes).value(c.total_bytes).value(c.total_count).value(c.acquired_bytes);
        w.value(c.peak_live_bytes).value(c.peak_acquired_bytes).value(c.live_count).value(c.peak_live_count);
        const auto i = static_cast<std::size_t>(&s - res.sites.data());
        w.value(owners[i]);
        const std::uint32_t uf = user.innermost_user(res, s.stack);
        w.value(uf != 0 ? static_cast<std::int64_t>(table.index(uf - 1)) : std::int64_t{-1});
        w.value(kind_labels[i]);
        w.end_array();
    }
    w.end_array();
    w.key("peak").begin_object();
    w.field("bytes", r.data.peak_bytes);
    w.end_object();

    w.key("devices").begin_array();
    std::map<int, std::size_t> contexts;
    for (const DeviceSummary& d : in.devices)
        write_device(w, d, contexts[d.device]++, r);
    w.end_array();
    w.key("accounting").begin_array();
    for (const DeviceAccountingSummary& a : in.accounting)
        write_accounting(w, a);
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
        if (const OomSplit* split = find_oom_split(in, o.record->seq))
            write_oom_split(w, *split);
        w.key("frames");
        write_frames(w, table, res, o.stack, buf);
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
    w.field("learn_seconds", c.learn_seconds);
    w.field("unwind_learnt", c.unwind_learnt);
    w.field("unique_sites", static_cast<std::uint64_t>(r.data.sites.size()));
    w.field("events", r.data.events);
    w.end_object();
    table.write(w);
    w.end_object();
    return w.flush();
}

bool write_html(util::OutputSink& out, const ReportInput& in, const StackReport& report) {
    bool ok = out.write(kHtmlHead);
    ScriptSafeSink safe(out);
    ok = write_html_data(safe, in, report) && ok;
    ok = safe.finish() && ok;
    return out.write(kHtmlTail) && ok;
}

std::string html_report(const ReportInput& in, const StackReport& report) {
    try {
        std::string page;
        util::StringSink sink(page);
        write_html(sink, in, report);
        return page;
    } catch (...) {
        return {};
    }
}

} // namespace gpumemprof::report
