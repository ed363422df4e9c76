// SPDX-License-Identifier: MIT
// RunSummary: its figures, reading a file of any kind, and the lines of a partial merge.
#include "tools/run_summary.hpp"

#include "report/json_report.hpp"
#include "tools/offline_report.hpp"
#include "trace/format.hpp"
#include "util/json_writer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace gpumemprof::tools {

const DeviceRun* RunSummary::peak_device() const {
    const DeviceRun* best = nullptr;
    for (const DeviceRun& d : devices)
        if (!best || d.peak_allocated > best->peak_allocated)
            best = &d;
    return best;
}

std::int64_t RunSummary::peak_allocated() const {
    const DeviceRun* d = peak_device();
    return d ? d->peak_allocated : 0;
}

std::int64_t RunSummary::peak_reserved() const {
    std::int64_t r = 0;
    for (const DeviceRun& d : devices)
        r = std::max(r, d.peak_reserved);
    return r;
}

std::int64_t RunSummary::ooms() const {
    std::int64_t n = 0;
    for (const DeviceRun& d : devices)
        n += d.ooms;
    return n;
}

bool input_kind(const std::string& path, InputKind* kind, std::string* error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        *error = std::string("cannot open: ") + std::strerror(errno);
        return false;
    }
    char head[64] = {};
    in.read(head, sizeof head);
    const std::string_view got(head, static_cast<std::size_t>(in.gcount()));
    if (got.size() >= sizeof trace::kFileMagic &&
        std::memcmp(got.data(), trace::kFileMagic, sizeof trace::kFileMagic) == 0)
        *kind = InputKind::trace;
    else if (got.substr(0, kPartialHeader.size()) == kPartialHeader)
        *kind = InputKind::partial;
    else if (!got.empty() && got.find_first_not_of(" \t\r\n") != std::string_view::npos &&
             got[got.find_first_not_of(" \t\r\n")] == '{')
        *kind = InputKind::report;
    else {
        *error = "neither a gpumemprof JSON report, a trace, nor a partial merge";
        return false;
    }
    return true;
}

namespace {

bool slurp(const std::string& path, std::string* text, std::string* error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        *error = std::string("cannot open: ") + std::strerror(errno);
        return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        *error = "read error";
        return false;
    }
    *text = std::move(ss).str();
    return true;
}

} // namespace

bool read_run(const std::string& path, const SiteKeys& keys, RunSummary* out, std::string* error) {
    InputKind kind;
    if (!input_kind(path, &kind, error))
        return false;
    std::string text;
    if (kind == InputKind::partial) {
        *error = "a partial merge holds many runs: give it to `gpumemprof merge`";
        return false;
    }
    if (kind == InputKind::trace) {
        OfflineReport rep;
        std::string warning;
        if (!build_offline_report(path, false, &rep, error, &warning))
            return false;
        text = report::json_report(rep.in, rep.stacks);
    } else if (!slurp(path, &text, error)) {
        return false;
    }
    out->file = path;
    return summary_from_report(text, keys, out, error);
}

// ---- partial merges: one JSON object per line ---------------------------------------------

std::string partial_line(const RunSummary& r) {
    util::JsonWriter w;
    w.begin_object();
    w.field("file", r.file);
    w.field("host", r.host);
    w.field("exe", r.exe);
    w.field("pid", r.pid);
    w.field("rank", r.rank);
    w.field("local_rank", r.local_rank);
    w.field("world_size", r.world_size);
    w.field("rank_from", r.rank_from);
    w.field("cuda_visible_devices", r.cuda_visible_devices);
    w.field("start_time_ns", r.start_time_ns);
    w.field("seconds_profiled", r.seconds_profiled);
    w.key("devices").begin_array();
    for (const DeviceRun& d : r.devices) {
        w.begin_object();
        w.field("device", d.device);
        w.field("peak_allocated", d.peak_allocated);
        w.field("peak_reserved", d.peak_reserved);
        w.field("peak_allocated_t_ns", d.peak_allocated_t_ns);
        w.field("reserved_at_peak", d.reserved_at_peak);
        w.field("ooms", d.ooms);
        w.field("points_cover_ns", d.points_cover_ns);
        w.key("timeline").begin_array();
        for (const TimelinePoint& p : d.timeline) {
            w.begin_array().value(p.t_ns).value(p.allocated).value(p.reserved).end_array();
        }
        w.end_array();
        w.key("oom_marks").begin_array();
        for (const OomMark& m : d.oom_marks)
            w.begin_array().value(m.t_ns).value(m.bytes).end_array();
        w.end_array();
        w.end_object();
    }
    w.end_array();
    w.field("has_sites", r.has_sites);
    // Only what merge compares: bytes at the peak (the sites with none are left out).
    w.key("sites").begin_array();
    for (const auto& [key, b] : r.sites)
        if (b.at_peak != 0)
            w.begin_array().value(key).value(b.at_peak).end_array();
    w.end_array();
    w.end_object();
    return w.take();
}

namespace {

using json = nlohmann::json;

template <typename T> T get_or(const json& j, const char* key, T fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return fallback;
    return it->get<T>();
}

RunSummary run_from_line(const json& j) {
    RunSummary r;
    r.file = get_or<std::string>(j, "file", "");
    r.host = get_or<std::string>(j, "host", "");
    r.exe = get_or<std::string>(j, "exe", "");
    r.pid = get_or<std::int64_t>(j, "pid", 0);
    r.rank = get_or<int>(j, "rank", -1);
    r.local_rank = get_or<int>(j, "local_rank", -1);
    r.world_size = get_or<int>(j, "world_size", -1);
    r.rank_from = get_or<std::string>(j, "rank_from", "");
    r.cuda_visible_devices = get_or<std::string>(j, "cuda_visible_devices", "");
    r.start_time_ns = get_or<std::uint64_t>(j, "start_time_ns", 0);
    r.seconds_profiled = get_or<double>(j, "seconds_profiled", 0);
    for (const json& d : j.at("devices")) {
        DeviceRun dev;
        dev.device = get_or<int>(d, "device", 0);
        dev.peak_allocated = get_or<std::int64_t>(d, "peak_allocated", 0);
        dev.peak_reserved = get_or<std::int64_t>(d, "peak_reserved", 0);
        dev.peak_allocated_t_ns = get_or<std::int64_t>(d, "peak_allocated_t_ns", -1);
        dev.reserved_at_peak = get_or<std::int64_t>(d, "reserved_at_peak", 0);
        dev.ooms = get_or<std::int64_t>(d, "ooms", 0);
        dev.points_cover_ns = get_or<std::int64_t>(d, "points_cover_ns", 0);
        for (const json& p : d.at("timeline"))
            dev.timeline.push_back(
                {p.at(0).get<std::int64_t>(), p.at(1).get<std::int64_t>(), p.at(2).get<std::int64_t>()});
        for (const json& m : d.at("oom_marks"))
            dev.oom_marks.push_back({m.at(0).get<std::int64_t>(), m.at(1).get<std::int64_t>()});
        r.devices.push_back(std::move(dev));
    }
    r.has_sites = get_or<bool>(j, "has_sites", false);
    for (const json& s : j.at("sites"))
        r.sites.push_back({s.at(0).get<std::string>(), SiteBytes{s.at(1).get<std::int64_t>(), 0}});
    std::sort(r.sites.begin(), r.sites.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return r;
}

} // namespace

bool read_partial(const std::string& path, const std::function<void(RunSummary&&)>& each, std::string* error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        *error = std::string("cannot open: ") + std::strerror(errno);
        return false;
    }
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (number == 1) {
            if (line != kPartialHeader) {
                *error = "line 1: not a partial merge";
                return false;
            }
            continue;
        }
        if (line.empty())
            continue;
        try {
            each(run_from_line(json::parse(line)));
        } catch (const json::exception& e) {
            *error = "line " + std::to_string(number) + ": not a run of a partial merge (" + e.what() + ")";
            return false;
        }
    }
    if (in.bad()) {
        *error = "read error";
        return false;
    }
    return true;
}

} // namespace gpumemprof::tools
