// SPDX-License-Identifier: MIT
// The profiler's reports: the snapshot they are written from (under the pool table's lock, one
// moment), where the files go, and the dump itself (src/report/ writes them).
#include "core/profiler.hpp"

#include "core/output_names.hpp"
#include "core/pool_events.hpp"
#include "core/process_images.hpp"
#include "core/process_state.hpp"
#include "core/signals.hpp"
#include "report/html_report.hpp"
#include "report/reports.hpp"
#include "report/torch_snapshot.hpp"
#include "stacks/recorder.hpp"
#include "stats/device_stats.hpp"
#include "util/atomic_file.hpp"
#include "util/log.hpp"
#include "util/swallowed.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>

namespace gpumemprof::core {
namespace {

report::PassthroughCounters figures(const KindCounters& k) {
    return {k.calls, k.frees, k.current_bytes, k.peak_bytes, k.total_bytes};
}

report::PassthroughSummary passthrough_figures(const DeviceLedger* ledger) {
    if (!ledger)
        return {};
    auto kind = [&](Kind k) { return figures(ledger->kinds[static_cast<int>(k)]); };
    return {kind(Kind::async), kind(Kind::managed), kind(Kind::vmm_physical), kind(Kind::vmm_mapped)};
}

} // namespace

// An earlier program of this process (before an exec without fork) wrote its report under our
// name: ours goes beside it.
void Profiler::choose_image_suffix() noexcept {
    try {
        image_suffix_.clear();
        if (output_pattern_.empty())
            return;
        const std::string stem =
            report_stem(output_pattern_, options_.output.find("%p") != std::string::npos, forked_child_);
        const std::string named = name_after_earlier_images(stem, ".json", ImageFile::json_report);
        if (named == stem)
            return;
        image_suffix_ = named.substr(stem.size());
        log::warn("this process ran another program before this one (exec): its report stays at {}.json; this "
                  "program's goes to {}.json",
                  stem, named);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

// ---- reports ----------------------------------------------------------------------------------

report::ReportInput Profiler::snapshot(const std::string& prefix) const {
    report::ReportInput in;
    in.prefix = prefix;
    in.pid = static_cast<int>(::getpid());
    in.host = util::host_name();
    in.exe = executable_path();
    in.alloc_conf = options_.alloc_conf;
    in.effective_alloc_conf = pool::format_alloc_conf(conf_);
    in.caching = options_.pool;
    in.mid_run = !process_exiting();
    in.torch_uncached = std::getenv("PYTORCH_NO_CUDA_MEMORY_CACHING") != nullptr; // PyTorch's own test
    in.reuse.mode = !options_.fenced_reuse ? "immediate" : options_.reuse_when_ordered ? "auto" : "fenced";
    in.reuse.at_once = !options_.fenced_reuse || (options_.reuse_when_ordered && !streams_.unordered());
    if (options_.reuse_when_ordered && streams_.unordered()) {
        in.reuse.lost_by = order_loss_text(streams_.lost_by());
        in.reuse.lost_stack = streams_.lost_stack();
    }
    in.reuse.library_streams = streams_.library_streams();
    in.stack_skip = options_.stack_skip;
    in.hide_frames = options_.hide_frames;
    in.user_code = options_.user_code;
    in.python_frames = options_.python;
    in.framework_env = framework_env_;
    const std::map<int, DeviceLedger> ledgers = ledger_.snapshot();
    for (auto& [device, d] : accounting_.snapshot()) {
        report::DeviceAccountingSummary a;
        a.device = device;
        if (const auto l = ledgers.find(device); l != ledgers.end())
            a.managed_used = l->second.kinds[static_cast<int>(Kind::managed)].calls +
                                 l->second.kinds[static_cast<int>(Kind::torch_managed)].calls >
                             0;
        a.has_peak = d.has_peak;
        a.has_exit = d.has_exit;
        a.peak = std::move(d.peak);
        a.exit = std::move(d.exit);
        a.readings = d.readings;
        a.driver_calls_measured = footprint_.measured_calls();
        a.history = std::move(d.history);
        in.accounting.push_back(std::move(a));
    }
    in.oom_splits = accounting_.oom_splits();
    in.rank = util::rank_info();
    in.steps = steps_.marks(&in.steps_dropped);
    auto lock = pools_.lock();
    const auto since_start = std::chrono::steady_clock::now() - start_;
    in.seconds_profiled = std::chrono::duration<double>(since_start).count();
    in.start_time_ns =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       (std::chrono::system_clock::now() -
                                        std::chrono::duration_cast<std::chrono::system_clock::duration>(since_start))
                                           .time_since_epoch())
                                       .count());
    in.doors = {doors_.dlsym_substitutions.load(), doors_.proc_address_substitutions.load(),
                doors_.runtime_calls.load()};
    in.foreign_invalid_frees = invalid_foreign_frees_.load();
    in.internal_errors = util::swallowed_count();
    in.torch_events = torch_cost_.summary();
    in.torch_events.deferred_events = torch_queue_.pushed();
    in.torch_events.most_waiting = torch_queue_.most_waiting();
    in.torch_events.dropped_events = torch_queue_.dropped();
    const DumpSignalState ds = dump_signal_state();
    in.dump_signal = ds.signal;
    in.dump_signal_installed = ds.installed;
    in.dump_signal_refused = ds.installed ? "" : ds.why_not;
    if (auto host = ledgers.find(kHostMemory); host != ledgers.end())
        in.host_pinned = figures(host->second.kinds[static_cast<int>(Kind::host_pinned)]);
    std::set<int> with_pool;
    // Destroyed contexts folded into one entry per device come first: they are the oldest.
    for (const auto& [device, folded] : retired_.entries()) {
        with_pool.insert(device);
        in.devices.push_back(folded);
    }
    for (const auto& s : pools_.all()) {
        with_pool.insert(s->device);
        if (!s->torch_ready.load(std::memory_order_acquire)) {
            in.devices.push_back(device_summary(*s, ledgers));
            continue;
        }
        // PyTorch's allocator first; our pool beside it when it served anything (the memory
        // PyTorch does not count: other libraries' cudaMalloc).
        report::DeviceSummary ours = device_summary(*s, ledgers);
        report::DeviceSummary theirs = torch_summary(*s);
        const bool served = ours.stats.segment[stats::kAll].allocated > 0;
        if (!served)
            theirs.passthrough = ours.passthrough;
        in.devices.push_back(std::move(theirs));
        if (served)
            in.devices.push_back(std::move(ours));
    }
    for (const auto& [device, ledger] : ledgers) {
        if (device < 0 || with_pool.count(device))
            continue;
        report::DeviceSummary d;
        d.device = device;
        d.stats = ledger_only_stats(&ledger);
        d.passthrough = passthrough_figures(&ledger);
        in.devices_without_pool.push_back(std::move(d));
    }
    return in;
}

report::DeviceSummary Profiler::device_summary(const PoolSlot& s, const std::map<int, DeviceLedger>& ledgers,
                                               bool with_history) const {
    report::DeviceSummary d;
    d.device = s.device;
    d.context = s.index;
    d.context_alive = s.ctx.load() != nullptr;
    d.stats = merged_stats(&s, ledgers);
    d.invalid_frees = s.pool->invalid_frees();
    d.ipc_refused = s.ipc_refused.load();
    d.kernel_fault = s.sticky_error.load();
    d.pool_counters = s.pool->counters();
    d.total_capacity = s.total_bytes;
    d.at_reserved_peak = s.pool->reserved_peak();
    d.pending = s.pool->pending();
    if (s.model) {
        d.has_model = true;
        d.model = s.model->stats();
        d.model_unserved = s.model->unserved();
        d.model_at_reserved_peak = s.model->reserved_peak();
    }
    if (pools_.carries_ledger(&s)) {
        auto it = ledgers.find(s.device);
        d.passthrough = passthrough_figures(it != ledgers.end() ? &it->second : nullptr);
    }
    if (!with_history)
        return d;
    d.history.segments = s.pool->snapshot();
    d.history.segments_known = true;
    // Right after the segments (the viewer replays the trace backwards from them; an allocation
    // made by another thread in between would appear in the events only).
    s.events->history([&](const std::function<void()>& fn) { s.pool->with_lock(fn); }, &d.history.series,
                      &d.history.events, &d.history.events_overwritten);
    return d;
}

std::int64_t Profiler::changes() const {
    std::int64_t n = 0;
    {
        auto lock = pools_.lock();
        for (const auto& s : pools_.all()) {
            const stats::DeviceStats st = s->pool->stats();
            n += st.allocation[stats::kAll].allocated + st.allocation[stats::kAll].freed;
        }
    }
    for (const auto& [device, ledger] : ledger_.snapshot())
        for (const KindCounters& k : ledger.kinds)
            n += k.calls + k.frees;
    return n;
}

void Profiler::consistent_snapshot(const std::string& prefix, report::ReportInput* in, stacks::ReportData* data) const {
    // The pools' figures and the call sites' are read one after the other. Once the state is
    // frozen for the final report, only an update that began before the process was exiting
    // can still land in between (one per thread at most): read again until nothing moved.
    for (int attempt = 0;; ++attempt) {
        const std::int64_t before = state_frozen() ? changes() : 0;
        *in = snapshot(prefix);
        // Without the sites' frames: resolving reads them from the recorder one site at a time.
        *data = stacks::Recorder::instance().collect(false);
        if (!state_frozen() || attempt == 16 || changes() == before)
            return;
    }
}

bool Profiler::dump(const std::string& prefix_pattern, bool on_demand) noexcept {
    try {
        CoreScope scope; // no cancellation point fires while our locks are held
        torch_drain();   // PyTorch's events so far are in the figures
        // One dump at a time (the exit handler, the signal thread and gpumemprof_dump may race):
        // they would write the same temporary file.
        std::lock_guard dump_lock(dump_mutex_);
        // Checked under the lock: on_exit marks the process exiting before it takes it, so a
        // dump asked for by signal either finished before the exit report or does not start.
        if (on_demand && process_exiting())
            return false;
        const std::string& pattern = prefix_pattern.empty() ? output_pattern_ : prefix_pattern;
        const bool pid_in_pattern =
            (prefix_pattern.empty() ? options_.output : prefix_pattern).find("%p") != std::string::npos;
        // Nothing to say for a process that never allocated device memory (unless asked).
        if (pattern.empty() || (prefix_pattern.empty() && !cuda_seen_.load()))
            return true;
        std::string error;
        std::string prefix = report_stem(pattern, pid_in_pattern, forked_child_);
        if (prefix_pattern.empty())
            prefix += image_suffix_; // beside an earlier program image's files
        // /dev/stdout, a FIFO, a device: the prefix is a name stem, never a file written to.
        struct stat st {};
        if (::stat(prefix.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
            log::warn("reports not written: {} is a device, FIFO or directory; GPUMEMPROF_OUTPUT is a file name prefix "
                      "(reports are <prefix>.json, <prefix>.txt, ...)",
                      prefix);
            return false;
        }
        report::ReportInput in;
        stacks::ReportData data;
        consistent_snapshot(prefix, &in, &data);
        // Symbolised once, outside the pool-table lock, for every file.
        const report::StackReport stacks = report::prepare_stack_report(in, std::move(data));
        return report::write_dump(in, stacks, {options_.pickle, options_.html});
    } catch (...) {
        return false;
    }
}

std::string Profiler::snapshot_json() noexcept {
    try {
        torch_drain();
        std::lock_guard dump_lock(dump_mutex_);
        const report::ReportInput in = snapshot(std::string());
        const report::StackReport stacks = report::prepare_stack_report(in);
        return report::torch_snapshot_json(in, stacks.data, stacks.resolved);
    } catch (...) {
        return {};
    }
}

} // namespace gpumemprof::core
