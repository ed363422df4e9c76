// SPDX-License-Identifier: MIT
#include "report/accounting_report.hpp"

#include "report/owner.hpp"
#include "util/byte_format.hpp"

#include <algorithm>
#include <cstdio>

namespace gpumemprof::report {
namespace {

void moment_json(util::JsonWriter& w, const AccountingMoment& m, const ResolvedReport* resolved) {
    w.field("driver_used_bytes", m.driver_used);
    w.field("driver_total_bytes", m.driver_total);
    w.field("t_s", static_cast<double>(m.t_ns) / 1e9);
    w.key("buckets").begin_object();
    for (const auto& [name, bytes] : m.buckets)
        w.field(name, bytes);
    w.end_object();
    w.key("by_library").begin_object();
    if (resolved)
        for (const auto& [lib, bytes] : bytes_by_library(m, *resolved))
            w.field(lib.empty() ? "the program" : lib, bytes);
    w.end_object();
    w.field("unexplained_bytes", m.unexplained());
}

void timeline_json(util::JsonWriter& w, const std::vector<AccountingMoment>& history) {
    w.key("timeline").begin_object();
    auto column = [&](const char* name, auto get) {
        w.key(name).begin_array();
        for (const AccountingMoment& m : history)
            w.value(get(m));
        w.end_array();
    };
    column("t_ns", [](const AccountingMoment& m) { return m.t_ns; });
    column("driver_used_bytes", [](const AccountingMoment& m) { return m.driver_used; });
    column("unexplained_bytes", [](const AccountingMoment& m) { return m.unexplained(); });
    const AccountingColumns c = accounting_columns(history);
    w.key("buckets").begin_object();
    for (std::size_t b = 0; b < c.names.size(); ++b) {
        w.key(c.names[b]).begin_array();
        for (std::int64_t v : c.columns[b])
            w.value(v);
        w.end_array();
    }
    w.end_object();
    w.end_object();
}

std::string percent(std::int64_t part, std::int64_t whole) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f%%",
                  whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
    return buf;
}

void moment_text(std::string& out, const char* when, const AccountingMoment& m, const ResolvedReport* resolved,
                 bool managed_used = false) {
    char t[64];
    std::snprintf(t, sizeof t, "%.3f s", static_cast<double>(m.t_ns) / 1e9);
    out += std::string("  ") + when + " (" + t + "): the driver counts " + util::torch_size_exact(m.driver_used) +
           " used of " + util::torch_size(m.driver_total) + "\n";
    for (const auto& [name, bytes] : m.buckets)
        out += "    " + util::torch_size_exact(bytes) + "  " + name + "\n";
    out += "    " + util::torch_size_exact(m.unexplained()) + "  unexplained (" +
           percent(m.unexplained(), m.driver_used) + "; the driver's own buffers" +
           (managed_used ? ", what it keeps for managed memory (after the frees too)" : "") +
           ", kernels loaded during a stream capture, other processes on the device)\n";
    const auto libs = resolved ? bytes_by_library(m, *resolved) : std::map<std::string, std::int64_t>{};
    if (libs.size() > 1 || (libs.size() == 1 && !libs.begin()->first.empty())) {
        out += "    live blocks outside PyTorch's allocator, by owner:";
        for (const auto& [lib, bytes] : libs)
            out += " " + (lib.empty() ? std::string("the program") : lib) + " " + util::torch_size(bytes) + ";";
        out += "\n";
    }
}

} // namespace

std::map<std::string, std::int64_t> bytes_by_library(const AccountingMoment& m, const StackReport& stacks) {
    if (!stacks.ok) {
        std::map<std::string, std::int64_t> out;
        for (const auto& site : m.pool_sites)
            out[""] += site.second;
        return out;
    }
    return bytes_by_library(m, stacks.resolved);
}

std::map<std::string, std::int64_t> bytes_by_library(const AccountingMoment& m, const ResolvedReport& resolved) {
    std::map<std::string, std::int64_t> out;
    for (const auto& [id, bytes] : m.pool_sites) {
        const std::ptrdiff_t i = resolved.site_by_id(id);
        const std::string lib =
            i < 0 ? std::string() : owning_library(resolved, resolved.sites[static_cast<std::size_t>(i)].stack);
        if (lib == "PyTorch")
            continue; // counted in PyTorch's allocator's buckets
        out[lib] += bytes;
    }
    return out;
}

void write_accounting_json(util::JsonWriter& w, const DeviceAccountingSummary& a, const StackReport& stacks) {
    const ResolvedReport* resolved = stacks.ok ? &stacks.resolved : nullptr;
    w.key("device_accounting").begin_object();
    w.field("managed_used", a.managed_used);
    if (a.has_peak)
        moment_json(w, a.peak, resolved); // at the peak of the driver's used figure
    if (a.has_exit) {
        w.key("at_exit").begin_object();
        moment_json(w, a.exit, resolved);
        w.end_object();
    }
    w.field("readings", static_cast<std::int64_t>(a.readings));
    w.field("driver_calls_measured", a.driver_calls_measured);
    timeline_json(w, a.history);
    w.end_object();
}

std::string accounting_text(const ReportInput& in, const StackReport& stacks) {
    std::string out;
    if (in.accounting.empty())
        return out;
    out += "\n== Where device memory went (the driver's used figure, split) ==\n";
    for (const DeviceAccountingSummary& a : in.accounting) {
        out += "device " + std::to_string(a.device) + ":\n";
        const ResolvedReport* resolved = stacks.ok ? &stacks.resolved : nullptr;
        if (a.has_peak)
            moment_text(out, "at the peak of device memory used", a.peak, resolved, a.managed_used);
        if (a.has_exit)
            moment_text(out, "at exit", a.exit, resolved, a.managed_used);
    }
    return out;
}

AccountingColumns accounting_columns(const std::vector<AccountingMoment>& history) {
    // A reading lists only its buckets with bytes, in the report's order: a name first seen later
    // goes right after the name before it in that reading, so the columns keep that order.
    AccountingColumns c;
    for (std::size_t i = 0; i < history.size(); ++i) {
        std::size_t at = 0;
        for (const auto& [name, bytes] : history[i].buckets) {
            auto it = std::find(c.names.begin(), c.names.end(), name);
            if (it == c.names.end()) {
                it = c.names.insert(c.names.begin() + static_cast<std::ptrdiff_t>(at), name);
                c.columns.insert(c.columns.begin() + static_cast<std::ptrdiff_t>(at),
                                 std::vector<std::int64_t>(history.size(), 0));
            }
            const auto k = static_cast<std::size_t>(it - c.names.begin());
            c.columns[k][i] += bytes;
            at = std::max(at, k + 1);
        }
    }
    return c;
}

const OomSplit* find_oom_split(const ReportInput& in, std::uint64_t seq) {
    if (seq == 0)
        return nullptr;
    for (const OomSplit& s : in.oom_splits)
        if (s.oom == seq)
            return &s;
    return nullptr;
}

std::string oom_split_text(const OomSplit& s, const ResolvedReport& resolved) {
    std::string out;
    if (s.has_accounting)
        moment_text(out, "device memory at the OOM", s.accounting, &resolved);
    std::int64_t total = 0;
    for (const auto& k : s.kinds)
        total += k.second;
    if (!s.kinds.empty()) {
        out += "  PyTorch's live blocks by kind at the OOM (" + util::torch_size_exact(total) + "):";
        for (const auto& [kind, bytes] : s.kinds)
            if (bytes != 0 || kind == "other")
                out += " " + kind + " " + util::torch_size_exact(bytes) + ";";
        out += "\n";
    }
    return out;
}

void write_oom_split_json(util::JsonWriter& w, const OomSplit& s, const ResolvedReport& resolved) {
    if (s.has_accounting) {
        w.key("device_accounting").begin_object();
        moment_json(w, s.accounting, &resolved);
        w.end_object();
    }
    if (!s.kinds.empty()) {
        w.key("memory_kinds").begin_object();
        for (const auto& [kind, bytes] : s.kinds)
            w.field(kind, bytes);
        w.end_object();
    }
}

} // namespace gpumemprof::report
