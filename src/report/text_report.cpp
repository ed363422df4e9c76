// SPDX-License-Identifier: MIT
// Text report layout (see text_report.hpp).
#include "report/text_report.hpp"

#include "pool/alloc_conf.hpp"

#include "report/accounting_report.hpp"
#include "report/frame_filter.hpp"
#include "report/line_profile.hpp"
#include "report/oom_advice.hpp"
#include "report/owner.hpp"
#include "report/site_kinds.hpp"
#include "report/user_code.hpp"
#include "util/byte_format.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

namespace gpumemprof::report {

namespace {

/// Call sites the leak list shows at most (a note gives the number and bytes of the rest).
constexpr int kLeakSites = 1000;

/// Fragmentation measured at one instant: when reserved bytes peaked (pool::ReservedPeak).
void fragmentation_line(util::BufferedOut& out, const char* indent, const pool::ReservedPeak& p) {
    out += std::string(indent) +
           "fragmentation when reserved peaked: " + util::torch_size_exact(p.reserved - p.allocated) +
           " reserved but not allocated (of " + util::torch_size(p.reserved) + "), of which " +
           util::torch_size_exact(p.inactive_split_bytes) + " free inside split segments\n";
}

void heading(util::BufferedOut& out, const std::string& title) {
    out += "\n== " + title + " ==\n";
}

/// The innermost `max` frames of a stack that the filter does not hide, innermost first,
/// indented, then how many were hidden among them and how many outer frames follow.
void stack_lines(util::BufferedOut& out, const ResolvedReport& r, std::uint32_t stack, std::size_t max,
                 const char* indent, const FrameFilter& filter) {
    if (stack == 0) {
        out += indent;
        out += "[no stack captured]\n";
        return;
    }
    bool all_hidden = true;
    for (std::uint32_t n = stack; n != 0 && all_hidden; n = r.stacks.parent(n))
        all_hidden = filter.hidden(r.frames[r.stacks.frame(n)]);
    std::size_t shown = 0, hidden = 0;
    std::uint32_t n = stack; // innermost first: up the tree
    for (; n != 0 && shown < max; n = r.stacks.parent(n)) {
        const SymbolFrame& f = r.frames[r.stacks.frame(n)];
        if (!all_hidden && filter.hidden(f)) {
            ++hidden;
            continue;
        }
        out += indent;
        out += shown == 0 ? "at " : "from ";
        out += r.frames.label_text(r.frames.label(r.stacks.frame(n)));
        out += '\n';
        ++shown;
    }
    const std::size_t outer = r.stacks.depth(n);
    if (hidden > 0 || outer > 0) {
        out += std::string(indent) + "(";
        if (hidden > 0)
            out += std::to_string(hidden) + " allocator/dispatch frame" + (hidden == 1 ? "" : "s") +
                   " not shown (GPUMEMPROF_HIDE_FRAMES)";
        if (hidden > 0 && outer > 0)
            out += "; ";
        if (outer > 0)
            out += std::to_string(outer) + " outer frame" + (outer == 1 ? "" : "s");
        out += ")\n";
    }
}

/// Each site's kind of memory as the report names it, by its index in r.sites ("" where none
/// is known: site_kind_labels).
using SiteKinds = std::vector<std::string>;

/// "kind of memory: activations", or each kind's bytes where a user's line has several; nothing
/// where no kind is known (not attached to PyTorch's allocator).
void kind_line(util::BufferedOut& out, std::vector<std::pair<std::string, std::int64_t>> by_kind) {
    if (std::all_of(by_kind.begin(), by_kind.end(), [](const auto& e) { return e.first.empty(); }))
        return;
    if (by_kind.size() == 1) {
        out += "    kind of memory: " + by_kind[0].first + "\n";
        return;
    }
    std::stable_sort(by_kind.begin(), by_kind.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out += "    kinds of memory:";
    for (std::size_t i = 0; i < by_kind.size(); ++i)
        out += std::string(i ? ", " : " ") + (by_kind[i].first.empty() ? std::string("not known") : by_kind[i].first) +
               " " + util::torch_size(by_kind[i].second);
    out += "\n";
}

/// The top sites led by the user's own line: sites with the same innermost line of user code
/// are one entry (one `loss = model(x)` is not forty sites); beneath it, the library frames of
/// its largest call stack. Sites without user code stand alone.
template <typename Key>
void top_user_sites(util::BufferedOut& out, const ResolvedReport& r, int n, Key key, const char* what,
                    const FrameFilter& filter, const UserCode& user, const SiteKinds& kinds) {
    struct Group {
        std::int64_t bytes = 0, count = 0, largest = -1;
        std::uint32_t frame = 0, stack = 0, stacks = 0;
        std::vector<std::pair<std::string, std::int64_t>> by_kind; ///< "": unknown
    };
    std::vector<Group> groups;
    std::unordered_map<std::uint32_t, std::size_t> by_label; // user line label -> group
    for (const std::uint32_t i : ranked_sites(r, key)) {
        const ResolvedSite& site = r.sites[i];
        const auto [bytes, count] = key(site);
        const std::uint32_t uf = user.innermost_user(r, site.stack);
        std::size_t g = groups.size();
        if (uf != 0) {
            auto [it, fresh] = by_label.try_emplace(r.frames.label(uf - 1), groups.size());
            g = it->second;
            if (fresh)
                groups.push_back(Group{});
        } else {
            groups.push_back(Group{});
        }
        Group& gr = groups[g];
        const std::string& kind = kinds[i];
        auto k = std::find_if(gr.by_kind.begin(), gr.by_kind.end(), [&](const auto& e) { return e.first == kind; });
        if (k == gr.by_kind.end())
            gr.by_kind.emplace_back(kind, bytes);
        else
            k->second += bytes;
        gr.bytes += bytes;
        gr.count += count;
        gr.frame = uf;
        ++gr.stacks;
        if (bytes > gr.largest) {
            gr.largest = bytes;
            gr.stack = site.stack;
        }
    }
    if (groups.empty()) {
        out += "(none)\n";
        return;
    }
    std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.bytes > b.bytes; });
    for (std::size_t i = 0; i < groups.size() && i < static_cast<std::size_t>(n); ++i) {
        const Group& g = groups[i];
        out += "#" + std::to_string(i + 1) + " " + util::torch_size_exact(g.bytes) + " " + what + " in " +
               std::to_string(g.count) + " block" + (g.count == 1 ? "" : "s");
        if (g.stacks > 1)
            out += " from " + std::to_string(g.stacks) + " call stacks";
        out += "\n";
        kind_line(out, g.by_kind);
        // The user's line first, unless it already is the first frame shown.
        std::uint32_t first_shown = 0;
        for (std::uint32_t f = g.stack; f != 0 && first_shown == 0; f = r.stacks.parent(f))
            if (!filter.hidden(r.frames[r.stacks.frame(f)]))
                first_shown = r.stacks.frame(f) + 1;
        if (g.frame != 0 && first_shown != g.frame) {
            out += "    " + r.frames.label_text(r.frames.label(g.frame - 1)) + "   <- your code\n";
            out += g.stacks > 1 ? "    the largest of its call stacks:\n" : "    called into:\n";
        }
        stack_lines(out, r, g.stack, 6, "    ", filter);
    }
    if (groups.size() > static_cast<std::size_t>(n)) {
        std::int64_t rest = 0;
        for (std::size_t i = static_cast<std::size_t>(n); i < groups.size(); ++i)
            rest += groups[i].bytes;
        out += "(" + std::to_string(groups.size() - static_cast<std::size_t>(n)) + " more, " +
               util::torch_size_exact(rest) + " " + what + ")\n";
    }
}

/// What happens to freed memory: reused at once, or kept until the device is past it, and why.
void reuse_line(util::BufferedOut& out, const ReportInput& in, const ResolvedReport& r) {
    if (!in.caching)
        return;
    if (in.reuse.at_once) {
        out += "freed memory is reused at once (GPUMEMPROF_REUSE=" + in.reuse.mode + ")\n";
        return;
    }
    out += "freed memory waits for the device before reuse (GPUMEMPROF_REUSE=" + in.reuse.mode + ")";
    if (!in.reuse.lost_by.empty()) {
        out += ": " + in.reuse.lost_by;
        const std::size_t shown = std::min<std::size_t>(r.reuse_lost_where.size(), 4);
        for (std::size_t i = 0; i < shown; ++i)
            out += (i == 0 ? " at " : " < ") + r.reuse_lost_where[i];
    }
    out += "\n";
}

/// Who was profiled, for how long, and the settings that shaped the run.
void header_lines(util::BufferedOut& out, const ReportInput& in) {
    out += "gpumemprof report for " + (in.exe.empty() ? std::string("?") : in.exe) + " (pid " + std::to_string(in.pid) +
           ")\n";
    char secs[64];
    std::snprintf(secs, sizeof secs, "%.3f", in.seconds_profiled);
    out += std::string("time under the profiler: ") + secs + " s\n";
    if (!in.alloc_conf.empty())
        out += "GPUMEMPROF_ALLOC_CONF: " + in.alloc_conf + "\n";
    if (in.dump_signal > 0 && !in.dump_signal_refused.empty())
        out += "GPUMEMPROF_DUMP_SIGNAL: signal " + std::to_string(in.dump_signal) + " is not taken (" +
               in.dump_signal_refused + "): no reports on demand by signal\n";
    if (!in.framework_env.empty()) {
        out += "set at load time (GPUMEMPROF_FRAMEWORK_ENV=0 turns this off):";
        for (const std::string& v : in.framework_env)
            out += " " + v;
        out += "\n";
    }
}

/// CUDA graph and MemPool private pools of PyTorch's allocator, what kind its memory was at the
/// peak, and the check against its own figures.
void torch_lines(util::BufferedOut& out, const DeviceSummary& d) {
    if (d.allocator != "pytorch")
        return;
    for (const pool::PrivatePoolBytes& p : d.private_pools)
        out += "  private pool (" + std::to_string(p.id.first) + ", " + std::to_string(p.id.second) +
               ") (CUDA graph or MemPool): reserved " + util::torch_size_exact(p.reserved) + ", allocated " +
               util::torch_size_exact(p.allocated) + " now; peak reserved " + util::torch_size_exact(p.peak_reserved) +
               "\n";
    std::int64_t peak_total = 0;
    for (const auto& k : d.kinds_at_peak)
        peak_total += k.second;
    if (peak_total > 0) {
        out += "  what the memory was when PyTorch's live total peaked (" + util::torch_size(peak_total) + "):";
        for (const auto& [kind, bytes] : d.kinds_at_peak)
            if (bytes > 0)
                out += " " + kind + " " + util::torch_size(bytes) + ";";
        out += "\n";
    }
    if (d.backward_matched + d.backward_unmatched > 0)
        out += "  backward-pass allocations charged to the forward line that caused them: " +
               std::to_string(d.backward_matched) + " of " + std::to_string(d.backward_matched + d.backward_unmatched) +
               " (the others' forward op allocated nothing; they name the autograd node)\n";
    if (d.mirror_mismatches > 0)
        out += "  " + std::to_string(d.mirror_mismatches) +
               " of PyTorch's allocator events did not fit the state rebuilt from the earlier ones: its figures "
               "here may be off\n";
    if (d.has_torch_check) {
        const auto theirs = stats::flatten(d.torch_reported);
        const auto ours = stats::flatten(d.torch_mirrored);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < theirs.size() && i < ours.size(); ++i)
            differ += theirs[i].second != ours[i].second;
        out += differ == 0 ? "  checked at exit: all " + std::to_string(theirs.size()) +
                                 " torch.cuda.memory_stats() keys equal PyTorch's own\n"
                           : "  checked at exit: " + std::to_string(differ) +
                                 " torch.cuda.memory_stats() keys differ from PyTorch's own (JSON pytorch_check)\n";
    }
}

/// The pool's figures of one device: peaks, fragmentation, counts. With expandable segments the
/// device calls are page maps/unmaps.
/// `torch_attached`: the report also shows PyTorch's attached allocator (ours then serves the rest).
void device_figures(util::BufferedOut& out, const DeviceSummary& d, const stacks::ReportData& data, bool expandable,
                    bool torch_attached) {
    // Peaks over the whole run, even where the program reset PyTorch's (they are in the JSON).
    const auto& st = d.program_resets > 0 ? d.whole_run : d.stats;
    const auto all = stats::kAll;
    out += "\ndevice " + std::to_string(d.device);
    if (d.total_capacity > 0)
        out += " (total capacity " + util::torch_size_u(d.total_capacity) + ")";
    if (d.allocator == "pytorch")
        out += ", PyTorch's caching allocator (" + d.allocator_status + ")";
    else if (torch_attached)
        out += ", gpumemprof's pool: memory PyTorch does not count (other libraries' cudaMalloc)";
    out += "\n";
    out += "  peak allocated:  " + util::torch_size_exact(st.allocated_bytes[all].peak) + "\n";
    out += "  peak reserved:   " + util::torch_size_exact(st.reserved_bytes[all].peak) + "\n";
    out += "  peak requested:  " + util::torch_size_exact(st.requested_bytes[all].peak) + "\n";
    const auto dev = static_cast<std::size_t>(d.device);
    if (d.device >= 0 && dev < data.device_live_at_peak.size())
        out +=
            "  live on this device at the process-wide peak: " + util::torch_size_exact(data.device_live_at_peak[dev]) +
            "\n";
    fragmentation_line(out, "  ", d.at_reserved_peak);
    out += "  now: reserved - allocated = " +
           util::torch_size_exact(st.reserved_bytes[all].current - st.allocated_bytes[all].current) +
           ", inactive split = " + util::torch_size_exact(st.inactive_split_bytes[all].current) + "\n";
    out += "  allocations: " + std::to_string(st.allocation[all].allocated) + " (peak live " +
           std::to_string(st.allocation[all].peak) + ", live now " + std::to_string(st.allocation[all].current) +
           "), segments: " + std::to_string(st.segment[all].allocated) + "\n";
    out += std::string(expandable ? "  page maps/unmaps (expandable segments): " : "  device alloc/free calls: ") +
           std::to_string(st.num_device_alloc) + " / " + std::to_string(st.num_device_free) +
           ", alloc retries: " + std::to_string(st.num_alloc_retries) + ", OOMs: " + std::to_string(st.num_ooms) +
           ", invalid frees: " + std::to_string(d.invalid_frees) + "\n";
}

/// What the pool waited for and what went wrong under it on one device (lines only when any).
void device_troubles(util::BufferedOut& out, const DeviceSummary& d) {
    if (d.pending.blocks.allocated > 0) {
        char waited[64], upkeep[96];
        std::snprintf(waited, sizeof waited, "%.3f ms", static_cast<double>(d.pool_counters.wait_ns) / 1e6);
        std::snprintf(upkeep, sizeof upkeep, "%.3f ms recording %lld fences, %.3f ms polling",
                      static_cast<double>(d.pool_counters.fence_ns) / 1e6,
                      static_cast<long long>(d.pool_counters.fences_recorded),
                      static_cast<double>(d.pool_counters.poll_ns) / 1e6);
        out += "  freed blocks waiting for the device (not allocated/active/requested): now " +
               util::torch_size_exact(d.pending.bytes.current) + " in " + std::to_string(d.pending.blocks.current) +
               " blocks, peak " + util::torch_size_exact(d.pending.bytes.peak) + " in " +
               std::to_string(d.pending.blocks.peak) +
               " blocks; waits on a miss: " + std::to_string(d.pool_counters.fence_waits) + " (" + waited + ", " +
               std::to_string(d.pool_counters.wait_timeouts) + " timed out); " + upkeep + "\n";
    }
    for (const auto& [code, count] : d.pool_counters.driver_errors)
        out += "  driver errors: CUDA error " + std::to_string(code) + " answered " + std::to_string(count) +
               " device allocation or free call(s); the requests that needed them got that error\n";
    if (d.kernel_fault != 0)
        out += "  a kernel faulted (CUDA error " + std::to_string(d.kernel_fault) +
               "): the context could run nothing more; its later allocations and frees got that error, "
               "as from the driver, and the figures are those of that moment\n";
    if (d.pool_counters.host_failures > 0)
        out += "  host memory ran out " + std::to_string(d.pool_counters.host_failures) +
               " time(s) for the pool's bookkeeping: those requests got out-of-memory\n";
    if (d.folded_contexts > 0)
        out += "  " + std::to_string(d.folded_contexts) +
               " destroyed contexts in one: counts are their sums, peaks the largest of any one\n";
    else if (!d.context_alive && d.context >= 0)
        out += "  its context is gone (destroyed, reset or lost): what it held was dropped with it\n";
}

/// PyTorch's allocator on the same requests (pool::PoolModel), when it ran.
void device_model(util::BufferedOut& out, const DeviceSummary& d, bool expandable) {
    if (!d.has_model)
        return;
    const auto& m = d.model;
    const auto all = stats::kAll;
    out += "  PyTorch's caching allocator on the same requests (model; it reuses a freed block at once on\n"
           "  its stream, where this pool may wait until the device has passed the free):\n";
    out += "    peak reserved:  " + util::torch_size_exact(m.reserved_bytes[all].peak) +
           ", peak allocated: " + util::torch_size_exact(m.allocated_bytes[all].peak) + "\n";
    fragmentation_line(out, "    ", d.model_at_reserved_peak);
    out +=
        std::string(expandable ? "    page maps: " : "    cudaMalloc calls: ") + std::to_string(m.num_device_alloc) +
        ", segments at the peak: " + std::to_string(m.segment[all].peak) + ", OOMs: " + std::to_string(m.num_ooms) +
        (d.model_unserved > 0 ? ", requests it could not serve: " + std::to_string(d.model_unserved) : std::string()) +
        "\n";
}

/// What capturing the stacks cost, and the allocations kept without one.
void capture_lines(util::BufferedOut& out, const stacks::CaptureStats& c) {
    char line[384];
    if (c.captures > 0) {
        const double n = static_cast<double>(c.captures);
        std::snprintf(line, sizeof line,
                      "stack capture cost: %llu stacks, %.1f frames and %.2f us each on average (unwind %.2f us, "
                      "of which Python frames %.2f us; intern %.2f us; %.0f%% from the per-thread cache; %.0f%% met "
                      "a walk the thread remembers, %.1f native frames each not walked), %.3f s in all\n",
                      static_cast<unsigned long long>(c.captures), static_cast<double>(c.frames) / n,
                      (c.unwind_seconds + c.intern_seconds) * 1e6 / n, c.unwind_seconds * 1e6 / n,
                      c.python_seconds * 1e6 / n, c.intern_seconds * 1e6 / n,
                      100.0 * static_cast<double>(c.cache_hits) / n, 100.0 * static_cast<double>(c.shadow_hits) / n,
                      static_cast<double>(c.shadow_frames) / n, c.unwind_seconds + c.intern_seconds);
        out += line;
        if (c.unwind_learnt > 0 && c.learn_seconds > 0) {
            // A short run pays mostly for first meetings; a long one sees the figure after them.
            std::snprintf(line, sizeof line,
                          "of that, learning how to unwind the %llu code addresses met for the first time (each "
                          "once): %.2f ms; without it a stack cost %.2f us on average\n",
                          static_cast<unsigned long long>(c.unwind_learnt), c.learn_seconds * 1e3,
                          (c.unwind_seconds + c.intern_seconds - c.learn_seconds) * 1e6 / n);
            out += line;
        }
        if (c.sample_one_in > 1) {
            std::snprintf(line, sizeof line,
                          "stacks sampled: 1 in %u allocations under %llu bytes unwound, each counted %u times in "
                          "its site; %llu left without a stack (totals, peaks and live blocks are exact)\n",
                          c.sample_one_in, static_cast<unsigned long long>(c.sample_always_from), c.sample_one_in,
                          static_cast<unsigned long long>(c.sampled_out));
            out += line;
        }
        if (c.libunwind_steps > 0 || c.full_unwinds > 0) {
            std::snprintf(line, sizeof line,
                          "frames with no simple unwind rule, stepped by libunwind each time they were met: %llu "
                          "(%.2f a stack); stacks libunwind unwound whole: %llu\n",
                          static_cast<unsigned long long>(c.libunwind_steps),
                          static_cast<double>(c.libunwind_steps) / n, static_cast<unsigned long long>(c.full_unwinds));
            out += line;
        }
        if (c.python_captures > 0) {
            const double frames = static_cast<double>(c.python_frames);
            std::snprintf(line, sizeof line,
                          "Python frames: found in %llu stacks (%.1f frames each on average; %.0f%% taken from the "
                          "thread's previous stack, %.0f%% without reading their code objects), included in that "
                          "cost\n",
                          static_cast<unsigned long long>(c.python_captures),
                          frames / static_cast<double>(c.python_captures),
                          frames > 0 ? 100.0 * static_cast<double>(c.python_compared) / frames : 0.0,
                          frames > 0 ? 100.0 * static_cast<double>(c.python_trusted) / frames : 0.0);
            out += line;
        }
    }
    if (c.small_stack_skips > 0) {
        std::snprintf(line, sizeof line,
                      "%llu allocations kept without a stack: made on a small stack, a coroutine or a signal stack "
                      "(under 32 KiB left to unwind)\n",
                      static_cast<unsigned long long>(c.small_stack_skips));
        out += line;
    }
}

/// What handling PyTorch's allocator events cost, on the threads that made them and on ours.
void torch_cost_line(util::BufferedOut& out, const EventCostSummary& c) {
    if (c.events == 0)
        return;
    char line[768];
    const double us = 1e6 / static_cast<double>(c.events);
    // A call site's traits (what its frames say for its kind of memory) are read on the thread
    // that made the event, once a site: a new site's native frames are looked up in the loader's
    // symbols, so a run of many new sites pays most of it in its first steps.
    if (c.deferred_events == 0) {
        std::snprintf(line, sizeof line,
                      "PyTorch allocator events: %llu, %.2f us each in the profiler on the thread that made them "
                      "(stacks %.2f, backward to forward %.2f, a call site's frames read for its kind, once a site "
                      "%.2f, kinds of memory %.2f, its blocks %.2f), %.3f s in all\n",
                      static_cast<unsigned long long>(c.events), c.seconds * us, c.stacks_seconds * us,
                      c.backward_seconds * us, c.traits_seconds * us, c.kinds_seconds * us, c.mirror_seconds * us,
                      c.seconds);
    } else {
        // Backward joins, kinds and blocks ran on our thread for the events handed to it.
        std::snprintf(line, sizeof line,
                      "PyTorch allocator events: %llu, %.2f us each in the profiler on the thread that made them "
                      "(stacks %.2f, a call site's frames read for its kind, once a site %.2f, handing %llu to the "
                      "profiler's thread %.2f), %.3f s in all; on the profiler's thread %.2f us each (backward to "
                      "forward %.2f, kinds of memory %.2f, its blocks %.2f), at most %llu waiting\n",
                      static_cast<unsigned long long>(c.events), c.seconds * us, c.stacks_seconds * us,
                      c.traits_seconds * us, static_cast<unsigned long long>(c.deferred_events),
                      c.handover_seconds * us, c.seconds, c.deferred_seconds * us, c.backward_seconds * us,
                      c.kinds_seconds * us, c.mirror_seconds * us, static_cast<unsigned long long>(c.most_waiting));
    }
    out += line;
    if (c.dropped_events != 0) {
        std::snprintf(line, sizeof line,
                      "PyTorch allocator events left out: %llu, after the profiler's thread made no progress for 10 s "
                      "(a gpumemprof bug: please report it). The PyTorch figures above stop where they begin\n",
                      static_cast<unsigned long long>(c.dropped_events));
        out += line;
    }
}

/// "Summary": process-wide figures, each device's, the call-site count and the capture cost.
void summary_section(util::BufferedOut& out, const ReportInput& in, const stacks::ReportData& data,
                     const ResolvedReport& r) {
    heading(out, "Summary");
    if (data.events == 0 && !in.devices.empty()) {
        // Call-site accounting was off the whole run (GPUMEMPROF_STACK_DEPTH=0): no process-wide
        // figures were kept; each device's own figures follow.
        out += "process-wide peak and live blocks: not kept (call-site accounting off: GPUMEMPROF_STACK_DEPTH=0)\n";
    } else {
        out += "process-wide peak of live bytes (all devices): " + util::torch_size_exact(data.peak_bytes) + "\n";
        out += "live at exit: " + util::torch_size_exact(data.live_bytes) + " in " + std::to_string(data.live_count) +
               " blocks\n";
    }
    std::vector<std::string> ignored;
    const bool expandable = pool::parse_alloc_conf(in.alloc_conf, &ignored).expandable_segments;
    const bool torch_attached = in.torch_attached();
    for (const DeviceSummary& d : in.devices) {
        device_figures(out, d, data, expandable, torch_attached);
        torch_lines(out, d);
        device_troubles(out, d);
        device_model(out, d, expandable);
    }
    out += "\nunique call sites: " + std::to_string(r.sites.size()) +
           ", OOMs recorded: " + std::to_string(data.ooms.size()) + "\n";
    capture_lines(out, data.capture);
    torch_cost_line(out, in.torch_events);
    if (in.internal_errors > 0)
        out += "the profiler caught " + std::to_string(in.internal_errors) +
               " exceptions inside its own code (out of memory, mostly) and carried on; what they were doing is "
               "missing from these figures (GPUMEMPROF_LOG=debug names the places)\n";
}

/// The two rankings of call sites and the two line profiles.
void site_sections(util::BufferedOut& out, const ReportInput& in, const ResolvedReport& r, const FrameFilter& filter,
                   const SiteKinds& kinds) {
    const UserCode user(in.exe, in.user_code);
    heading(out, "Top call sites by bytes live at the peak");
    top_user_sites(
        out, r, in.top_n,
        [](const ResolvedSite& s) {
            return std::make_pair(s.counters().peak_live_bytes, s.counters().peak_live_count);
        },
        "live at the peak", filter, user, kinds);
    heading(out, "Top call sites by total bytes allocated");
    top_user_sites(
        out, r, in.top_n,
        [](const ResolvedSite& s) { return std::make_pair(s.counters().total_bytes, s.counters().total_count); },
        "allocated", filter, user, kinds);

    heading(out, "Line profile, cumulative (used_bytes, acquired_bytes)");
    out += "used_bytes: bytes the pool handed out for requests made under the frame over the whole run;\n"
           "acquired_bytes: device memory the pool obtained from the driver while serving those requests.\n";
    write_line_profile(out, r, TreeView::cumulative);
    heading(out, "Line profile at the peak (live_bytes, acquired_bytes)");
    out += "live_bytes: bytes under the frame live when the process-wide total peaked;\n"
           "acquired_bytes: device memory obtained for requests under the frame up to that moment.\n";
    write_line_profile(out, r, TreeView::at_peak);
}

void leak_section(util::BufferedOut& out, const ReportInput& in, const ResolvedReport& r, const FrameFilter& filter,
                  const std::vector<std::string>& owner, const SiteKinds& kinds) {
    // Mid-run (gpumemprof_dump, the dump signal) the program may still free them: no leaks yet.
    heading(out, in.mid_run ? "Live blocks now, the program still running (grouped by call site)"
                            : "Leaks at exit (live blocks grouped by call site)");
    // Blocks a library keeps for the whole process (cuBLAS's workspaces, NCCL's buffers,
    // PyTorch's cached tensors and pinned host buffers at exit) are no leaks of the program's
    // code: listed apart. The program's own, by the user's line as the top sites are.
    // Each site's owner (worked out once: the ranking's sort asks for a site's bytes many times);
    // the key is given elements of r.sites, so a site's index is its place there.
    top_user_sites(
        out, r, kLeakSites,
        [&](const ResolvedSite& s) {
            return owner[static_cast<std::size_t>(&s - r.sites.data())].empty()
                       ? std::make_pair(s.counters().live_bytes, s.counters().live_count)
                       : std::make_pair(std::int64_t{0}, std::int64_t{0});
        },
        in.mid_run ? "live" : "leaked", filter, UserCode(in.exe, in.user_code), kinds);
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> kept;
    for (std::size_t i = 0; i < r.sites.size(); ++i)
        if (!owner[i].empty()) {
            auto& k = kept[owner[i]];
            k.first += r.sites[i].counters().live_bytes;
            k.second += r.sites[i].counters().live_count;
        }
    for (const auto& [lib, k] : kept)
        out += "kept by " + lib + ": " + util::torch_size_exact(k.first) + " in " + std::to_string(k.second) +
               " block" + (k.second == 1 ? "" : "s") + ", its own memory, not a leak of the program's code\n";
    if (in.mid_run)
        out += "Blocks live when this report was written, asked for while the program ran (gpumemprof_dump or the\n"
               "dump signal): the program may still free them. The report at exit lists its leaks.\n";
    else
        out += "Blocks live when this report was written; at exit, after the program's exit handlers and the global\n"
               "and ELF destructors of the program and its libraries (frees made there are seen).\n";
}

void oom_section(util::BufferedOut& out, const ReportInput& in, const ResolvedReport& r, const FrameFilter& filter) {
    heading(out, "Out-of-memory events");
    if (r.ooms.empty())
        out += "(none)\n";
    int k = 0;
    for (const ResolvedOom& o : r.ooms) {
        const stacks::OomRecord& rec = *o.record;
        out += "OOM #" + std::to_string(++k) + " on device " + std::to_string(rec.device) + ": request of " +
               util::torch_size_exact(static_cast<std::int64_t>(rec.info.requested)) + "\n";
        out += "  " + oom_message(rec.device, rec.info) + "\n";
        if (const OomSplit* split = find_oom_split(in, rec.seq))
            out += oom_split_text(*split, r);
        out += "  stack:\n";
        stack_lines(out, r, o.stack, 32, "    ", filter);
        out += "  suggestion: " + o.suggestion + "\n";
    }
}

} // namespace

bool write_text(util::OutputSink& sink, const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& r,
                const std::string& accounting) {
    const FrameFilter filter(in.hide_frames ? in.hide_frames->c_str() : nullptr);
    util::BufferedOut out(sink);
    header_lines(out, in);
    reuse_line(out, in, r);
    summary_section(out, in, data, r);
    out += accounting;
    // Each site's kind of memory and owner, for both sections.
    const std::vector<const DeviceSummary::SiteKind*> kind = site_kinds(in, r);
    const std::vector<std::string> owners = site_owners(in, r, kind);
    const SiteKinds kinds = site_kind_labels(in, r, kind, owners);
    site_sections(out, in, r, filter, kinds);
    leak_section(out, in, r, filter, owners, kinds);
    oom_section(out, in, r, filter);
    return out.flush();
}

std::string text_report(const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& r,
                        const std::string& accounting) {
    std::string s;
    util::StringSink sink(s);
    write_text(sink, in, data, r, accounting);
    return s;
}

} // namespace gpumemprof::report
