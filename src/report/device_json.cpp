// SPDX-License-Identifier: MIT
#include "report/device_json.hpp"

namespace gpumemprof::report {

void write_reserved_peak(util::JsonWriter& w, const pool::ReservedPeak& p) {
    w.key("at_reserved_peak").begin_object();
    w.field("reserved", p.reserved);
    w.field("allocated", p.allocated);
    w.field("inactive_split_bytes", p.inactive_split_bytes);
    w.end_object();
}

void write_kind_timeline(util::JsonWriter& w, const DeviceSummary& d) {
    w.key("timeline").begin_object();
    w.field("changes", d.kind_changes);
    w.field("slot_ns", d.kind_slot_ns);
    w.key("t_ns").begin_array();
    for (std::int64_t t : d.kind_t_ns)
        w.value(t);
    w.end_array();
    w.key("bytes").begin_object();
    for (std::size_t k = 0; k < d.kinds_at_peak.size(); ++k) {
        w.key(d.kinds_at_peak[k].first).begin_array();
        for (const std::vector<std::int64_t>& p : d.kind_points)
            w.value(k < p.size() ? p[k] : 0);
        w.end_array();
    }
    w.end_object();
    w.end_object();
}

void write_allocator(util::JsonWriter& w, const DeviceSummary& d) {
    w.field("allocator", d.allocator);
    if (d.allocator != "pytorch")
        return;
    w.field("allocator_status", d.allocator_status);
    w.field("mirror_mismatches", d.mirror_mismatches);
    w.field("program_resets", static_cast<std::int64_t>(d.program_resets));
    if (d.program_resets > 0) // memory_stats follows the program's resets; this is the whole run
        w.key("whole_run_memory_stats").raw(stats::to_json(d.whole_run));
    w.key("private_pools").begin_array();
    for (const pool::PrivatePoolBytes& p : d.private_pools) {
        w.begin_object();
        w.key("id")
            .begin_array()
            .value(static_cast<std::int64_t>(p.id.first))
            .value(static_cast<std::int64_t>(p.id.second))
            .end_array();
        w.field("reserved_bytes", p.reserved);
        w.field("allocated_bytes", p.allocated);
        w.field("peak_reserved_bytes", p.peak_reserved);
        w.field("peak_allocated_bytes", p.peak_allocated);
        w.end_object();
    }
    w.end_array();
    // What kind of memory PyTorch's blocks are (core/memory_categories.hpp).
    w.key("memory_kinds").begin_object();
    for (const auto* set : {&d.kinds_at_peak, &d.kinds_now}) {
        w.key(set == &d.kinds_at_peak ? "at_peak" : "now").begin_object();
        for (const auto& [kind, bytes] : *set)
            w.field(kind, bytes);
        w.end_object();
    }
    write_kind_timeline(w, d);
    // The rules' work: phases begun, blocks looked at when one ended, blocks whose kind changed.
    w.key("rules").begin_object();
    w.field("phase_changes", d.kind_phase_changes);
    w.field("survivor_checks", d.kind_survivor_checks);
    w.field("survivors", d.kind_survivors);
    w.field("timeline_points_moved", d.kind_points_moved);
    w.end_object();
    w.end_object();
    w.key("backward_attribution").begin_object();
    w.field("to_forward_line", d.backward_matched);
    w.field("forward_op_unseen", d.backward_unmatched);
    w.end_object();
    if (!d.has_torch_check)
        return;
    // torch.cuda.memory_stats() as PyTorch itself reported it at exit, and every key where our
    // figures at that moment differ (none expected).
    w.key("pytorch_check").begin_object();
    w.key("memory_stats").raw(stats::to_json(d.torch_reported));
    w.key("differing_keys").begin_object();
    const auto theirs = stats::flatten(d.torch_reported);
    const auto ours = stats::flatten(d.torch_mirrored);
    for (std::size_t i = 0; i < theirs.size() && i < ours.size(); ++i)
        if (theirs[i].second != ours[i].second)
            w.key(theirs[i].first).begin_array().value(ours[i].second).value(theirs[i].second).end_array();
    w.end_object();
    w.end_object();
}

void write_model(util::JsonWriter& w, const char* key, const DeviceSummary& d) {
    w.key(key).begin_object();
    w.key("memory_stats").raw(stats::to_json(d.model));
    w.field("unserved", d.model_unserved);
    write_reserved_peak(w, d.model_at_reserved_peak);
    w.end_object();
}

} // namespace gpumemprof::report
