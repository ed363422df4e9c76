// SPDX-License-Identifier: MIT
#include "report/accounting_report.hpp"

#include "report/owner.hpp"
#include "util/byte_format.hpp"

#include <cstdio>
#include <unordered_map>

namespace gpumemprof::report {
namespace {

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
    for (const auto& [id, bytes] : m.pool_sites) {
        const std::ptrdiff_t i = stacks.ok ? stacks.resolved.site_by_id(id) : -1;
        const std::string lib =
            i < 0 ? std::string()
                  : owning_library(stacks.resolved, stacks.resolved.sites[static_cast<std::size_t>(i)].stack);
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
