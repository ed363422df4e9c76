// SPDX-License-Identifier: MIT
// JSON sections (see json_sections.hpp).
#include "report/json_sections.hpp"

#include "report/user_code.hpp"

#include <unordered_map>

#include "report/accounting_report.hpp"
#include "report/oom_advice.hpp"
#include "report/owner.hpp"
#include "report/site_kinds.hpp"

#include <algorithm>

namespace gpumemprof::report {

namespace {

/// A stack as indices into "frames", root first.
void stack_json(util::JsonWriter& w, const ResolvedReport& r, std::uint32_t stack, std::vector<std::uint32_t>& buf) {
    r.stacks.frames(stack, &buf);
    w.begin_array();
    for (std::uint32_t f : buf)
        w.value(static_cast<std::uint64_t>(f));
    w.end_array();
}

void frame_table_json(util::JsonWriter& w, const FrameTable& table) {
    w.key("frames");
    w.begin_array();
    for (std::uint32_t i = 0; i < table.size(); ++i) {
        const SymbolFrame& f = table[i];
        w.begin_object();
        w.field("function", f.function);
        w.field("file", f.file);
        w.field("line", f.line);
        w.field("module", f.module);
        w.field("offset", static_cast<std::uint64_t>(f.offset));
        w.field("kind", f.python ? "python" : "native");
        w.end_object();
    }
    w.end_array();
}

/// `owners` (site_owners): each entry also names the library that keeps the blocks ("" for the
/// program).
template <typename Key>
void ranked(util::JsonWriter& w, const ResolvedReport& r, Key key, const std::vector<std::string>* owners = nullptr) {
    w.begin_array();
    for (std::uint32_t i : ranked_sites(r, key)) {
        w.begin_object();
        w.field("site", static_cast<std::uint64_t>(i));
        w.field("bytes", key(r.sites[i]).first);
        w.field("count", key(r.sites[i]).second);
        if (owners)
            w.field("owner", (*owners)[i]);
        w.end_object();
    }
    w.end_array();
}

} // namespace

void json_sections(util::JsonWriter& w, const ReportInput& in, const stacks::ReportData& data,
                   const ResolvedReport& r) {
    std::vector<std::uint32_t> buf;
    frame_table_json(w, r.frames);
    const std::vector<const DeviceSummary::SiteKind*> kinds = site_kinds(in, r);
    const UserCode user(in.exe, in.user_code);
    w.key("sites");
    w.begin_array();
    for (std::size_t si = 0; si < r.sites.size(); ++si) {
        const ResolvedSite& s = r.sites[si];
        const auto& c = s.counters();
        w.begin_object();
        w.key("frames");
        stack_json(w, r, s.stack, buf);
        w.field("live_bytes", c.live_bytes);
        w.field("live_count", c.live_count);
        w.field("total_bytes", c.total_bytes);
        w.field("total_count", c.total_count);
        w.field("requested_bytes", c.requested_bytes);
        w.field("used_bytes", c.total_bytes);
        w.field("acquired_bytes", c.acquired_bytes);
        w.field("peak_live_bytes", c.peak_live_bytes);
        w.field("peak_live_count", c.peak_live_count);
        w.field("peak_acquired_bytes", c.peak_acquired_bytes);
        // The innermost frame of the user's own code (report/user_code.hpp): an index into "frames".
        if (const std::uint32_t uf = user.innermost_user(r, s.stack); uf != 0)
            w.field("user_frame", static_cast<std::uint64_t>(uf - 1));
        if (kinds[si]) {
            w.field("memory_kind", kinds[si]->kind);
            w.field("kind_rule", kinds[si]->rule);
        }
        w.end_object();
    }
    w.end_array();

    w.key("peak");
    w.begin_object();
    w.field("bytes", data.peak_bytes);
    w.key("devices");
    w.begin_array();
    for (std::size_t d = 0; d < data.device_live_at_peak.size(); ++d) {
        w.begin_object();
        w.field("device", static_cast<std::uint64_t>(d));
        w.field("bytes", data.device_live_at_peak[d]);
        w.end_object();
    }
    w.end_array();
    w.key("sites");
    ranked(w, r, [](const ResolvedSite& s) {
        return std::make_pair(s.counters().peak_live_bytes, s.counters().peak_live_count);
    });
    w.end_object();

    w.key("leaks");
    w.begin_object();
    w.field("bytes", data.live_bytes);
    w.field("count", data.live_count);
    w.key("sites");
    const std::vector<std::string> owners = site_owners(in, r, kinds);
    ranked(
        w, r, [](const ResolvedSite& s) { return std::make_pair(s.counters().live_bytes, s.counters().live_count); },
        &owners);
    w.end_object();

    w.key("ooms");
    w.begin_array();
    for (const ResolvedOom& o : r.ooms) {
        const stacks::OomRecord& rec = *o.record;
        w.begin_object();
        w.field("device", rec.device);
        w.field("requested", static_cast<std::uint64_t>(rec.info.requested));
        w.field("rounded", static_cast<std::uint64_t>(rec.info.rounded));
        w.field("allocation_size", static_cast<std::uint64_t>(rec.info.allocation_size));
        w.field("device_free", static_cast<std::uint64_t>(rec.info.device_free));
        w.field("device_total", static_cast<std::uint64_t>(rec.info.device_total));
        w.field("allocated", rec.info.allocated);
        w.field("reserved", rec.info.reserved);
        w.field("largest_free_block", static_cast<std::uint64_t>(rec.info.largest_free_block));
        w.field("allowed", static_cast<std::uint64_t>(rec.info.allowed));
        w.field("status", rec.info.status);
        w.field("message", oom_message(rec.device, rec.info));
        w.field("suggestion", o.suggestion);
        if (const OomSplit* split = find_oom_split(in, rec.seq))
            write_oom_split_json(w, *split, r);
        w.key("frames");
        stack_json(w, r, o.stack, buf);
        w.end_object();
    }
    w.end_array();

    w.key("stacks");
    w.begin_object();
    w.field("unique_sites", static_cast<std::uint64_t>(r.sites.size()));
    w.field("events", data.events);
    w.field("unknown_frees", data.unknown_frees);
    const stacks::CaptureStats& c = data.capture;
    w.field("captures", c.captures);
    w.field("frames_captured", c.frames);
    w.field("cache_hits", c.cache_hits);
    w.field("shadow_hits", c.shadow_hits);         // native walks that stopped where they met the previous one
    w.field("shadow_frames", c.shadow_frames);     // frames those copied from it instead of walking them
    w.field("python_captures", c.python_captures); // stacks that had Python frames
    w.field("python_frames", c.python_frames);
    w.field("python_frames_compared", c.python_compared); // taken by comparing with the thread's previous capture
    w.field("python_frames_trusted", c.python_trusted);   // of those, code objects not read: none destroyed since
    w.field("small_stack_skips", c.small_stack_skips);    // kept under "no stack": too little stack to unwind
    w.field("sample_one_in", static_cast<std::uint64_t>(c.sample_one_in < 1 ? 1 : c.sample_one_in));
    w.field("sample_always_from", c.sample_one_in > 1 ? c.sample_always_from : 0);
    w.field("sampled_out", c.sampled_out); // allocations sampling left without a stack
    w.field("unwind_seconds", c.unwind_seconds);
    w.field("python_seconds", c.python_seconds); // the part of unwind_seconds spent on the Python frames
    w.field("intern_seconds", c.intern_seconds);
    w.field("unwind_rules", c.unwind_rules);       // code addresses with a learnt rule (the process's table)
    w.field("unwind_learnt", c.unwind_learnt);     // rules libunwind worked out (the table's misses)
    w.field("learn_seconds", c.learn_seconds);     // of unwind_seconds, the time learning them
    w.field("libunwind_steps", c.libunwind_steps); // frames stepped by libunwind one at a time (no simple rule)
    w.field("full_unwinds", c.full_unwinds);       // stacks libunwind unwound whole
    w.field("tree_nodes", c.tree_nodes);           // the trace tree's nodes (distinct stacks, shared outer parts once)
    if (in.torch_events.events > 0) {
        // What handling PyTorch's allocator events cost, on the threads that made them and on ours.
        const EventCostSummary& t = in.torch_events;
        w.key("torch_events");
        w.begin_object();
        w.field("events", t.events);
        w.field("seconds", t.seconds);
        w.field("stacks_seconds", t.stacks_seconds);
        w.field("backward_seconds", t.backward_seconds);
        w.field("traits_seconds", t.traits_seconds); // a call site's frames read for its kind, on the program's threads
        w.field("kinds_seconds", t.kinds_seconds);
        w.field("mirror_seconds", t.mirror_seconds);
        w.field("handover_seconds", t.handover_seconds); // handing events to the profiler's thread
        w.field("deferred_seconds", t.deferred_seconds); // that thread's time on them
        w.field("deferred_events", t.deferred_events);
        w.field("most_waiting", t.most_waiting);     // the most that waited for it at once
        w.field("dropped_events", t.dropped_events); // left out after our thread stalled
        w.end_object();
    }
    w.end_object();
}

} // namespace gpumemprof::report
