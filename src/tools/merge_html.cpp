// SPDX-License-Identifier: MIT
// The merged job as one self-contained page (no script, no network): the ranks' table, one small
// timeline per rank on the job's common clock and one scale (so that the imbalance shows), the
// call sites whose bytes at the peak differ most, the first OOM and the per-host sums.
#include "tools/merge.hpp"

#include "util/byte_format.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace gpumemprof::tools {
namespace {

std::string esc(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

std::string rank_label(int rank) {
    return rank >= 0 ? std::to_string(rank) : std::string("?");
}

std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
}

constexpr double kW = 360, kH = 60;

/// One rank's allocated (filled) and reserved (line) bytes over the job's time span.
std::string small_multiple(const MergeResult& m, const MergedRank& r, double span_s, std::int64_t top) {
    const double offset_s =
        m.t0_ns && r.run.start_time_ns ? static_cast<double>(r.run.start_time_ns - m.t0_ns) / 1e9 : 0.0;
    std::string svg = "<svg width=\"" + num(kW) + "\" height=\"" + num(kH) + "\" viewBox=\"0 0 " + num(kW) + " " +
                      num(kH) + "\"><rect width=\"100%\" height=\"100%\" fill=\"#f7f7f7\"/>";
    auto x = [&](std::int64_t t_ns) { return (offset_s + static_cast<double>(t_ns) / 1e9) / span_s * kW; };
    auto y = [&](std::int64_t v) { return kH - static_cast<double>(v) / static_cast<double>(top) * (kH - 2); };
    for (const DeviceRun& d : r.run.devices) {
        if (d.timeline.empty())
            continue;
        std::string area = "M" + num(x(d.timeline.front().t_ns)) + "," + num(kH);
        std::string line;
        for (std::size_t i = 0; i < d.timeline.size(); ++i) {
            const TimelinePoint& p = d.timeline[i];
            const std::int64_t next = i + 1 < d.timeline.size() ? d.timeline[i + 1].t_ns : p.t_ns;
            area += " L" + num(x(p.t_ns)) + "," + num(y(p.allocated)) + " L" + num(x(next)) + "," + num(y(p.allocated));
            line += (line.empty() ? "M" : " L") + num(x(p.t_ns)) + "," + num(y(p.reserved)) + " L" + num(x(next)) +
                    "," + num(y(p.reserved));
        }
        area += " L" + num(x(d.timeline.back().t_ns)) + "," + num(kH) + " Z";
        svg += "<path d=\"" + area + "\" fill=\"#4a7fb5\" fill-opacity=\"0.6\"/>";
        svg += "<path d=\"" + line + "\" fill=\"none\" stroke=\"#c0504d\" stroke-width=\"1\"/>";
        for (const OomMark& o : d.oom_marks)
            svg += "<line x1=\"" + num(x(o.t_ns)) + "\" x2=\"" + num(x(o.t_ns)) + "\" y1=\"0\" y2=\"" + num(kH) +
                   "\" stroke=\"#000\" stroke-dasharray=\"2,2\"/>";
    }
    return svg + "</svg>";
}

} // namespace

std::string merge_html(const MergeResult& m) {
    double span_s = 1e-9;
    std::int64_t top = 1;
    for (const MergedRank& r : m.ranks) {
        const double offset_s =
            m.t0_ns && r.run.start_time_ns ? static_cast<double>(r.run.start_time_ns - m.t0_ns) / 1e9 : 0.0;
        span_s = std::max(span_s, offset_s + r.run.seconds_profiled);
        top = std::max({top, r.run.peak_reserved(), r.run.peak_allocated()});
    }
    std::string h;
    h += "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>gpumemprof merge: " +
         std::to_string(m.ranks.size()) +
         " ranks</title><style>"
         "body{font:13px sans-serif;margin:1em}table{border-collapse:collapse}td,th{padding:2px 8px;"
         "text-align:right}td.l,th.l{text-align:left}tr:nth-child(even){background:#f0f0f0}"
         ".grid{display:flex;flex-wrap:wrap;gap:8px}.cell{font-size:11px}</style></head><body>";
    h += "<h1>" + std::to_string(m.ranks.size()) + " ranks on " + std::to_string(m.hosts.size()) + " host" +
         (m.hosts.size() == 1 ? "" : "s") + "</h1>";
    for (const std::string& w : m.warnings)
        h += "<p>warning: " + esc(w) + "</p>";
    if (!m.ranks.empty()) {
        const MergedRank& big = m.ranks[m.largest];
        const MergedRank& small = m.ranks[m.smallest];
        h += "<p>Largest peak: rank " + rank_label(big.run.rank) + ", " + util::iec_size(big.run.peak_allocated()) +
             "; smallest: rank " + rank_label(small.run.rank) + ", " + util::iec_size(small.run.peak_allocated()) +
             "; spread " + util::iec_size(big.run.peak_allocated() - small.run.peak_allocated()) + ".</p>";
    }
    h += "<h2 id=\"timelines\">Timelines</h2><p>Per rank, on the job's clock (" + num(span_s) +
         " s across) and one scale (" + util::iec_size(top) +
         " full height): allocated (blue), reserved (red), OOMs (dashed).</p><div class=\"grid\">";
    for (const MergedRank& r : m.ranks)
        h += "<div class=\"cell\">rank " + rank_label(r.run.rank) + " (" + esc(r.run.host) + ") peak " +
             util::iec_size(r.run.peak_allocated()) + "<br>" + small_multiple(m, r, span_s, top) + "</div>";
    h += "</div><h2 id=\"sites\">Call sites whose bytes at each rank's peak differ most</h2><table><tr><th>spread</th>"
         "<th>least (rank)</th><th>most (rank)</th><th class=\"l\">site</th></tr>";
    for (const SiteSpread& s : m.sites)
        h += "<tr><td>" + util::iec_size(s.spread()) + "</td><td>" + util::iec_size(s.min) + " (" +
             rank_label(m.ranks[s.min_rank].run.rank) + ")</td><td>" + util::iec_size(s.max) + " (" +
             rank_label(m.ranks[s.max_rank].run.rank) + ")</td><td class=\"l\">" + esc(m.site_names[s.id]) +
             "</td></tr>";
    h += "</table>";
    if (m.first_oom) {
        const FirstOom& o = *m.first_oom;
        h += "<h2 id=\"oom\">First OOM</h2><p>Rank " + rank_label(m.ranks[o.rank].run.rank) + " at " +
             num(static_cast<double>(o.t_ns) / 1e9) + " s, asking for " + util::iec_size(o.bytes) +
             ". What each rank held then:</p><table><tr><th>rank</th><th>allocated</th><th>reserved</th></tr>";
        for (const HeldThen& x : o.held)
            h += "<tr><td>" + rank_label(m.ranks[x.rank].run.rank) + "</td><td>" +
                 (x.state == HeldThen::State::held ? util::iec_size(x.allocated) : std::string("-")) + "</td><td>" +
                 (x.state == HeldThen::State::held ? util::iec_size(x.reserved) : std::string("-")) + "</td></tr>";
        h += "</table>";
    }
    h += "<h2 id=\"ranks\">Ranks</h2><table><tr><th>rank</th><th>local</th><th class=\"l\">host</th><th>peak "
         "allocated</th><th>peak reserved</th><th>peak at s</th><th>OOMs</th><th class=\"l\">file</th></tr>";
    for (const MergedRank& r : m.ranks)
        h += "<tr><td>" + rank_label(r.run.rank) + "</td><td>" + rank_label(r.run.local_rank) +
             "</td><td class=\"l\">" + esc(r.run.host) + "</td><td>" + util::iec_size(r.run.peak_allocated()) +
             "</td><td>" + util::iec_size(r.run.peak_reserved()) + "</td><td>" + num(m.peak_time_s(r)) + "</td><td>" +
             std::to_string(r.run.ooms()) + "</td><td class=\"l\">" + esc(r.run.file) + "</td></tr>";
    h += "</table><h2 id=\"hosts\">Hosts</h2><table><tr><th class=\"l\">host</th><th>ranks</th><th>sum of peaks "
         "allocated</th><th>sum of peaks reserved</th><th>OOMs</th></tr>";
    for (const HostSum& x : m.hosts)
        h += "<tr><td class=\"l\">" + esc(x.host) + "</td><td>" + std::to_string(x.ranks) + "</td><td>" +
             util::iec_size(x.peak_allocated) + "</td><td>" + util::iec_size(x.peak_reserved) + "</td><td>" +
             std::to_string(x.ooms) + "</td></tr>";
    h += "</table></body></html>\n";
    return h;
}

} // namespace gpumemprof::tools
