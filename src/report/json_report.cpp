// SPDX-License-Identifier: MIT
// The exit JSON (see json_report.hpp and docs/outputs.md).
#include "report/json_report.hpp"

#include "report/accounting_report.hpp"
#include "report/device_json.hpp"
#include "report/json_sections.hpp"
#include "report/json_timeline.hpp"
#include "util/json_writer.hpp"

#include <set>

namespace gpumemprof::report {
namespace {

/// "K": one kind of pass-through memory.
void write_counters(util::JsonWriter& w, const PassthroughCounters& k) {
    w.begin_object();
    w.field("calls", k.calls);
    w.field("frees", k.frees);
    w.field("current_bytes", k.current_bytes);
    w.field("peak_bytes", k.peak_bytes);
    w.field("total_bytes", k.total_bytes);
    w.end_object();
}

void write_passthrough(util::JsonWriter& w, const PassthroughSummary& p) {
    w.key("passthrough").begin_object();
    w.key("async");
    write_counters(w, p.async);
    w.key("managed");
    write_counters(w, p.managed);
    w.key("vmm_physical");
    write_counters(w, p.vmm_physical);
    w.key("vmm_mapped");
    write_counters(w, p.vmm_mapped);
    w.end_object();
}

/// The device's accounting (core/device_accounting), in the first of its entries.
void write_device_accounting(util::JsonWriter& w, int device, const ReportInput& in, const StackReport& stacks) {
    for (const DeviceAccountingSummary& a : in.accounting)
        if (a.device == device)
            write_accounting_json(w, a, stacks);
}

void write_pool_device(util::JsonWriter& w, const DeviceSummary& d, const ReportInput& in, const StackReport& stacks,
                       bool first_of_device) {
    w.begin_object();
    w.field("device", d.device);
    w.field("context", d.context);
    w.field("context_alive", d.context_alive);
    if (d.folded_contexts > 0)
        w.field("folded_contexts", d.folded_contexts);
    write_allocator(w, d);
    w.key("memory_stats").raw(stats::to_json(d.stats));
    w.field("invalid_frees", d.invalid_frees);
    w.field("ipc_refused", d.ipc_refused);
    if (d.kernel_fault != 0)
        w.field("kernel_fault", d.kernel_fault);
    w.key("pool_counters").begin_object();
    w.field("fences_recorded", d.pool_counters.fences_recorded);
    w.field("fence_polls", d.pool_counters.fence_polls);
    w.field("misses", d.pool_counters.misses);
    w.field("deferred_frees", d.pool_counters.deferred_frees);
    w.field("fence_waits", d.pool_counters.fence_waits);
    w.field("wait_timeouts", d.pool_counters.wait_timeouts);
    w.field("wait_ns", d.pool_counters.wait_ns);
    w.field("fence_ns", d.pool_counters.fence_ns);
    w.field("poll_ns", d.pool_counters.poll_ns);
    w.field("host_failures", d.pool_counters.host_failures);
    w.end_object();
    // Codes other than out-of-memory the driver answered the pool's cuMemAlloc/cuMemFree with.
    w.key("driver_errors").begin_object();
    for (const auto& [code, count] : d.pool_counters.driver_errors)
        w.field(std::to_string(code), count);
    w.end_object();
    // Freed by the program, waiting for the device to pass the free before the pool may hand
    // them out again: not allocated, active or requested (those are the program's figures).
    w.key("pending_free").begin_object();
    w.field("bytes_current", d.pending.bytes.current);
    w.field("bytes_peak", d.pending.bytes.peak);
    w.field("blocks_current", d.pending.blocks.current);
    w.field("blocks_peak", d.pending.blocks.peak);
    w.field("blocks_total", d.pending.blocks.allocated);
    w.end_object();
    write_reserved_peak(w, d.at_reserved_peak);
    if (d.has_model) // the same 122 keys as PyTorch's caching allocator would report them
        write_model(w, "pytorch_model", d);
    write_passthrough(w, d.passthrough);
    write_timeline(w, d.history.series);
    if (first_of_device)
        write_device_accounting(w, d.device, in, stacks);
    w.end_object();
}

/// A device with pass-through memory only: its ledger's figures, no pool; its device accounting
/// when no pool entry of the device carried it (the .txt has it either way).
void write_poolless_device(util::JsonWriter& w, const DeviceSummary& d, const ReportInput& in,
                           const StackReport& stacks, bool first_of_device) {
    w.begin_object();
    w.field("device", d.device);
    w.field("context", -1);
    w.field("context_alive", false);
    w.key("memory_stats").raw(stats::to_json(d.stats));
    w.field("invalid_frees", 0);
    w.field("ipc_refused", 0);
    write_passthrough(w, d.passthrough);
    if (first_of_device)
        write_device_accounting(w, d.device, in, stacks);
    w.end_object();
}

/// "reuse": GPUMEMPROF_REUSE, whether freed blocks are reused at once, and if auto stopped doing
/// so, why and where (frame labels, innermost first; empty when stacks were off).
void write_reuse(util::JsonWriter& w, const ReportInput& in, const StackReport& stacks) {
    if (!in.caching)
        return; // GPUMEMPROF_POOL=0: every free is the driver's own
    w.key("reuse").begin_object();
    w.field("mode", in.reuse.mode);
    w.field("at_once", in.reuse.at_once);
    w.field("library_streams", static_cast<std::int64_t>(in.reuse.library_streams));
    if (!in.reuse.lost_by.empty()) {
        w.field("stopped_because", in.reuse.lost_by);
        w.key("stopped_at").begin_array();
        if (stacks.ok)
            for (const std::string& f : stacks.resolved.reuse_lost_where)
                w.value(f);
        w.end_array();
    }
    w.end_object();
}

} // namespace

bool write_json(util::OutputSink& out, const ReportInput& in, const StackReport& stacks) {
    util::JsonWriter w(&out);
    w.begin_object();
    w.field("version", 2);
    w.field("pid", static_cast<std::int64_t>(in.pid));
    w.field("host", in.host);
    w.field("exe", in.exe);
    write_run_place(w, in);
    w.field("alloc_conf", in.effective_alloc_conf);
    w.field("pool", in.caching ? "caching" : "passthrough");
    write_reuse(w, in, stacks);
    w.key("framework_env").begin_array();
    for (const std::string& v : in.framework_env)
        w.value(v);
    w.end_array();
    w.field("seconds_profiled", in.seconds_profiled);
    w.field("mid_run", in.mid_run); // written while the program ran: "leaks" are its live blocks then
    w.key("doors").begin_object();
    w.field("dlsym_substitutions", in.doors.dlsym_substitutions);
    w.field("proc_address_substitutions", in.doors.proc_address_substitutions);
    w.field("runtime_calls", in.doors.runtime_calls);
    w.end_object();
    w.key("host_pinned");
    write_counters(w, in.host_pinned);
    w.field("foreign_invalid_frees", in.foreign_invalid_frees);
    w.field("internal_errors", in.internal_errors);
    w.key("dump_signal").begin_object();
    w.field("signal", in.dump_signal);
    w.field("installed", in.dump_signal_installed);
    if (!in.dump_signal_refused.empty())
        w.field("not_installed_because", in.dump_signal_refused);
    w.end_object();
    w.key("devices").begin_array();
    std::set<int> seen;
    for (const DeviceSummary& d : in.devices)
        write_pool_device(w, d, in, stacks, seen.insert(d.device).second);
    for (const DeviceSummary& d : in.devices_without_pool)
        write_poolless_device(w, d, in, stacks, seen.insert(d.device).second);
    w.end_array();
    // Call sites, peak attribution, leaks and OOM events, the same as the .txt.
    if (stacks.ok)
        json_sections(w, in, stacks.data, stacks.resolved);
    w.end_object();
    return w.flush();
}

std::string json_report(const ReportInput& in, const StackReport& stacks) {
    std::string out;
    util::StringSink sink(out);
    write_json(sink, in, stacks);
    return out;
}

} // namespace gpumemprof::report
