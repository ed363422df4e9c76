// SPDX-License-Identifier: MIT
#include "report/accounting_report.hpp"

#include "report/owner.hpp"
#include "util/byte_format.hpp"

#include <cstdio>
#include <unordered_map>

namespace gpumemprof::report {
namespace {

std::unordered_map<std::uint64_t, const ResolvedSite*> sites_by_id(const StackReport& stacks) {
    std::unordered_map<std::uint64_t, const ResolvedSite*> out;
    if (!stacks.ok)
        return out;
    for (std::size_t i = 0; i < stacks.data.sites.size() && i < stacks.resolved.site_of.size(); ++i)
        out[stacks.data.sites[i].id] = &stacks.resolved.sites[stacks.resolved.site_of[i]];
    return out;
}

void moment_json(util::JsonWriter& w, const AccountingMoment& m, const StackReport& stacks) {
    w.field("driver_used_bytes", m.driver_used);
    w.field("driver_total_bytes", m.driver_total);
    w.field("t_s", static_cast<double>(m.t_ns) / 1e9);
    w.key("buckets").begin_object();
    for (const auto& [name, bytes] : m.buckets)
        w.field(name, bytes);
    w.end_object();
    w.key("by_library").begin_object();
    for (const auto& [lib, bytes] : bytes_by_library(m, stacks))
        w.field(lib.empty() ? "the program" : lib, bytes);
    w.end_object();
    w.field("unexplained_bytes", m.unexplained());
}

std::string percent(std::int64_t part, std::int64_t whole) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f%%",
                  whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
    return buf;
}

void moment_text(std::string& out, const char* when, const AccountingMoment& m, const StackReport& stacks) {
    char t[64];
    std::snprintf(t, sizeof t, "%.3f s", static_cast<double>(m.t_ns) / 1e9);
    out += std::string("  ") + when + " (" + t + "): the driver counts " + util::torch_size_exact(m.driver_used) +
           " used of " + util::torch_size(m.driver_total) + "\n";
    for (const auto& [name, bytes] : m.buckets)
        out += "    " + util::torch_size_exact(bytes) + "  " + name + "\n";
    out += "    " + util::torch_size_exact(m.unexplained()) + "  unexplained (" +
           percent(m.unexplained(), m.driver_used) +
           "; kernels loaded since, the driver's own buffers, other processes on the device)\n";
    const auto libs = bytes_by_library(m, stacks);
    if (libs.size() > 1 || (libs.size() == 1 && !libs.begin()->first.empty())) {
        out += "    live blocks outside PyTorch's allocator, by owner:";
        for (const auto& [lib, bytes] : libs)
            out += " " + (lib.empty() ? std::string("the program") : lib) + " " + util::torch_size(bytes) + ";";
        out += "\n";
    }
}

} // namespace

std::map<std::string, std::int64_t> bytes_by_library(const AccountingMoment& m, const StackReport& stacks) {
    std::map<std::string, std::int64_t> out;
    const auto sites = sites_by_id(stacks);
    for (const auto& [id, bytes] : m.pool_sites) {
        auto it = sites.find(id);
        const std::string lib = it == sites.end() ? std::string() : owning_library(it->second->frames);
        if (lib == "PyTorch")
            continue; // counted in PyTorch's allocator's buckets
        out[lib] += bytes;
    }
    return out;
}

void write_accounting_json(util::JsonWriter& w, const DeviceAccountingSummary& a, const StackReport& stacks) {
    w.key("device_accounting").begin_object();
    if (a.has_peak)
        moment_json(w, a.peak, stacks); // at the peak of the driver's used figure
    if (a.has_exit) {
        w.key("at_exit").begin_object();
        moment_json(w, a.exit, stacks);
        w.end_object();
    }
    w.field("readings", static_cast<std::int64_t>(a.readings));
    w.end_object();
}

std::string accounting_text(const ReportInput& in, const StackReport& stacks) {
    std::string out;
    if (in.accounting.empty())
        return out;
    out += "\n== Where device memory went (the driver's used figure, split) ==\n";
    for (const DeviceAccountingSummary& a : in.accounting) {
        out += "device " + std::to_string(a.device) + ":\n";
        if (a.has_peak)
            moment_text(out, "at the peak of device memory used", a.peak, stacks);
        if (a.has_exit)
            moment_text(out, "at exit", a.exit, stacks);
    }
    return out;
}

} // namespace gpumemprof::report
