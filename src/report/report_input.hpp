// SPDX-License-Identifier: MIT
// The snapshot the core hands the report writers (besides the recorder's data): taken at one
// moment, under the pool table's lock, so that the JSON and the .txt describe the same instant.
#pragma once

#include "pool/device_pool.hpp"
#include "pool/torch_mirror.hpp"
#include "stats/device_stats.hpp"
#include "stats/event_ring.hpp"
#include "stats/time_series.hpp"
#include "util/options.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::report {

/// calls/frees/current/peak/total of one kind of pass-through memory (JSON "K").
struct PassthroughCounters {
    std::int64_t calls = 0;
    std::int64_t frees = 0;
    std::int64_t current_bytes = 0;
    std::int64_t peak_bytes = 0;
    std::int64_t total_bytes = 0;
};

/// The device memory that passed through to the driver, by kind (JSON "passthrough").
struct PassthroughSummary {
    PassthroughCounters async, managed, vmm_physical, vmm_mapped;
};

/// One pool's past and present, for the HTML report and the PyTorch snapshot.
struct DeviceHistory {
    stats::SeriesData series;
    std::vector<stats::PoolEvent> events;    ///< the latest pool events, oldest first
    std::uint64_t events_overwritten = 0;    ///< older events no longer kept
    std::vector<pool::SegmentInfo> segments; ///< the pool's segments and blocks at the dump
    bool segments_known = false;             ///< false: rebuilt from a trace, segments unknown
};

struct DeviceSummary {
    int device = 0;
    /// Whose allocator these figures are: "gpumemprof" (our pool) or "pytorch" (PyTorch's own
    /// caching allocator, attached: GPUMEMPROF_TORCH=attach).
    std::string allocator = "gpumemprof";
    std::string allocator_status;                      ///< "attached to PyTorch 2.11.0's caching allocator"
    std::vector<pool::PrivatePoolBytes> private_pools; ///< CUDA graph / MemPool pools (pytorch)
    std::int64_t mirror_mismatches = 0;                ///< PyTorch events that did not fit the rebuilt layout
    /// How often the program reset PyTorch's statistics (stats follows them, as
    /// torch.cuda.memory_stats() does) and, when it did, the same keys over the whole run.
    int program_resets = 0;
    stats::DeviceStats whole_run;
    /// What kind of memory PyTorch's blocks are (core/memory_categories.hpp): live bytes by kind
    /// when the total peaked and now, each site's kind and the rule that placed it.
    std::vector<std::pair<std::string, std::int64_t>> kinds_at_peak, kinds_now;
    struct SiteKind {
        std::uint32_t site = 0;
        std::string kind, rule;
    };
    std::vector<SiteKind> site_kinds;
    /// The same over time (core/kind_timeline.hpp): at kind_t_ns[i] (since the profiler started)
    /// kind_points[i][k] bytes were live of the kind named kinds_at_peak[k].first.
    std::vector<std::int64_t> kind_t_ns;
    std::vector<std::vector<std::int64_t>> kind_points;
    std::uint64_t kind_changes = 0; ///< changes seen in all
    std::int64_t kind_slot_ns = 0;  ///< 0: every change far enough from the last point is a point
    /// The kind rules' work (core::MemoryCategories::Summary): phases begun, blocks looked at
    /// when one ended, blocks whose kind changed then, timeline points those moved.
    std::uint64_t kind_phase_changes = 0, kind_survivor_checks = 0, kind_survivors = 0, kind_points_moved = 0;
    /// Backward allocations charged to their forward line, and those whose forward op was unseen.
    std::int64_t backward_matched = 0, backward_unmatched = 0;
    /// PyTorch's own statistics read at exit, and ours at that moment (pytorch, when read).
    bool has_torch_check = false;
    stats::DeviceStats torch_reported, torch_mirrored;
    int context = -1; ///< the pool's number (order of creation); -1: no pool (pass-through only)
    bool context_alive = false;
    /// > 0: this entry is that many destroyed contexts folded into one (the older ones beyond
    /// those the report keeps whole): counts summed, peaks the largest of any one, no history;
    /// `context` is the newest of them.
    int folded_contexts = 0;
    stats::DeviceStats stats;
    std::int64_t invalid_frees = 0;
    std::int64_t ipc_refused = 0;
    /// The error a kernel's fault left the context answering (core: PoolSlot::sticky_error); 0: none.
    int kernel_fault = 0;
    pool::PoolCounters pool_counters;
    PassthroughSummary passthrough; ///< zero unless this pool carries its device's ledger
    std::size_t total_capacity = 0;
    pool::ReservedPeak at_reserved_peak; ///< the pool when its reserved bytes peaked
    /// Blocks the program freed that waited for a fence (outside the 122 keys), and the waits.
    pool::PendingStats pending;
    /// PyTorch's allocator on the same requests (pool::PoolModel), when GPUMEMPROF_MODEL is on.
    bool has_model = false;
    stats::DeviceStats model;
    std::int64_t model_unserved = 0;
    pool::ReservedPeak model_at_reserved_peak;
    DeviceHistory history;
};

/// One moment's split of a device's memory as the driver counts it (core/device_accounting.hpp).
struct AccountingMoment {
    std::int64_t t_ns = 0;        ///< since the profiler started
    std::int64_t driver_used = 0; ///< cuMemGetInfo's total - free, for the whole device
    std::int64_t driver_total = 0;
    /// Bytes by bucket, in the report's order.
    std::vector<std::pair<std::string, std::int64_t>> buckets;
    /// Live bytes by call site at that moment (all of the device's blocks the call-site accounting
    /// knows); the reports split those not PyTorch's by the library that allocated them.
    std::vector<std::pair<std::uint32_t, std::int64_t>> pool_sites;
    std::int64_t accounted() const {
        std::int64_t sum = 0;
        for (const auto& b : buckets)
            sum += b.second;
        return sum;
    }
    std::int64_t unexplained() const { return driver_used - accounted(); }
};

/// A device's accounting: at the peak of the driver's used figure, at exit, and over time.
struct DeviceAccountingSummary {
    int device = 0;
    bool has_peak = false, has_exit = false;
    AccountingMoment peak, exit;
    int readings = 0;
    /// Driver calls measured for what the driver took for itself (core/driver_footprint.hpp),
    /// in the whole process.
    std::int64_t driver_calls_measured = 0;
    std::vector<AccountingMoment> history; ///< buckets only, bounded
    /// The program took managed memory on this device: the driver keeps memory of its own for it,
    /// which no call names, even after the frees (docs/design.md, Known limits).
    bool managed_used = false;
};

/// What a device held at an OOM: the driver's used figure split as the accounting splits it, and
/// PyTorch's live blocks by kind. Matched to the OOM's record by its number (stacks::OomRecord::seq).
struct OomSplit {
    std::uint64_t oom = 0;
    int device = 0;
    bool has_accounting = false; ///< false: the driver's figure could not be read then
    AccountingMoment accounting;
    std::vector<std::pair<std::string, std::int64_t>> kinds; ///< empty: PyTorch's allocator not attached
};

/// GPUMEMPROF_REUSE and what became of reuse at once (JSON "reuse", a line of the .txt).
struct ReuseSummary {
    std::string mode = "auto";    ///< auto, fenced or immediate
    bool at_once = true;          ///< freed blocks are reused at once now (no fence)
    std::string lost_by;          ///< why reuse at once ended under auto ("" while it holds)
    std::uint32_t lost_stack = 0; ///< stacks::Recorder id of the call that ended it (0: unknown)
    int library_streams = 0;      ///< streams cuDNN made for itself: they kept the one order
};

/// How many allocations reached us by each door (JSON "doors").
struct DoorCounts {
    std::int64_t dlsym_substitutions = 0;
    std::int64_t proc_address_substitutions = 0;
    std::int64_t runtime_calls = 0;
};

/// What one device's pool held when a step began.
struct StepDevice {
    int device = 0;
    std::int64_t allocated = 0;
    std::int64_t reserved = 0;
};

/// A step the program marked (gpumemprof_mark_step): its number, when it began (ns since the
/// process started) and what each device's pool held then.
struct StepMark {
    std::int64_t step = -1;
    std::int64_t t_ns = 0;
    std::vector<StepDevice> devices;
};

/// What handling PyTorch's allocator events cost (core/event_cost.hpp), in seconds summed over
/// the run: on the threads that made them (`seconds`: stacks, backward and the handover are
/// parts of it) and on the profiler's own thread (`deferred_seconds`). Kinds and blocks are
/// parts of the one where they ran (the profiler's thread, or the program's with
/// GPUMEMPROF_TORCH_THREAD=0): all parts add up to at most the two wholes.
struct EventCostSummary {
    std::uint64_t events = 0;
    double seconds = 0;          ///< the handlers, entry to return, on the program's threads
    double stacks_seconds = 0;   ///< capturing stacks
    double backward_seconds = 0; ///< charging backward allocations to forward lines
    /// On the allocating thread: what a call site's frames say for its kind of memory. A new
    /// site's frames are read, its native ones looked up in the loader's symbols (dladdr); its
    /// later events find the answer in a per-thread cache or a process-wide map.
    double traits_seconds = 0;
    double kinds_seconds = 0;          ///< the kind of memory
    double mirror_seconds = 0;         ///< rebuilding the allocator's blocks and statistics
    double handover_seconds = 0;       ///< handing events to the profiler's thread
    double deferred_seconds = 0;       ///< the profiler's thread, handling them
    std::uint64_t deferred_events = 0; ///< events handled there
    std::uint64_t most_waiting = 0;    ///< the most that waited for it at once
    /// Events left out after that thread stalled (core/torch_queue.hpp): the PyTorch figures
    /// stop where the first was dropped. 0 in a healthy run.
    std::uint64_t dropped_events = 0;
};

struct ReportInput {
    std::string prefix; ///< files are <prefix>.json, .txt, .folded, .alloc.folded
    int pid = 0;
    std::string host;
    std::string exe;
    /// The process's place in a distributed job (RANK, LOCAL_RANK, WORLD_SIZE or the launcher's).
    util::RankInfo rank;
    /// Time zero of every t_ns (the process start) as Unix epoch nanoseconds: lines up the
    /// reports of many processes on one clock. 0 = unknown.
    std::uint64_t start_time_ns = 0;
    std::vector<StepMark> steps; ///< oldest first
    std::uint64_t steps_dropped = 0;
    double seconds_profiled = 0;
    /// Written while the program ran (gpumemprof_dump, the dump signal), not at its exit or a
    /// fatal signal: its live blocks are no leaks yet.
    bool mid_run = false;
    std::string alloc_conf;           ///< GPUMEMPROF_ALLOC_CONF as given (for OOM advice)
    std::string effective_alloc_conf; ///< the settings in effect, every key spelled out
    bool caching = true;              ///< the pool caches (false: GPUMEMPROF_POOL=0)
    /// PYTORCH_NO_CUDA_MEMORY_CACHING is set (by GPUMEMPROF_TORCH=pool or the user): each
    /// cudaMalloc of PyTorch's allocator is a tensor, not a cached segment (report/owner.hpp).
    bool torch_uncached = false;
    ReuseSummary reuse;
    DoorCounts doors;
    PassthroughCounters host_pinned;
    std::int64_t foreign_invalid_frees = 0;
    /// Exceptions the profiler caught inside its own code and carried on past (util/swallowed.hpp).
    std::uint64_t internal_errors = 0;
    /// GPUMEMPROF_DUMP_SIGNAL: the signal (0 = none), whether our handler is installed, and why
    /// not ("the program handles it"): the JSON's "dump_signal" and a line in the .txt.
    int dump_signal = 0;
    bool dump_signal_installed = false;
    std::string dump_signal_refused;
    std::vector<DeviceSummary> devices; ///< one per pool, in table order
    EventCostSummary torch_events;      ///< events == 0: not attached to PyTorch's allocator
    /// Devices with pass-through memory but no pool (JSON only: context -1, ledger figures).
    std::vector<DeviceSummary> devices_without_pool;
    int top_n = 10; ///< rows in the "top call sites" tables
    /// Module-name substrings dropped from the top of stacks (GPUMEMPROF_STACK_SKIP, a
    /// comma-separated list); unset = kDefaultStackSkip.
    std::optional<std::string> stack_skip;
    /// Frames the .txt stack listings leave out (GPUMEMPROF_HIDE_FRAMES, FrameFilter syntax);
    /// unset = kDefaultHiddenFrames.
    std::optional<std::string> hide_frames;
    /// GPUMEMPROF_USER_CODE: globs naming the user's own code ("" = report/user_code.hpp's rule).
    std::string user_code;
    /// GPUMEMPROF_PYTHON: 0 native only, 1 Python frames merged, 2 merged and interpreter kept.
    int python_frames = 1;
    /// Variables the library set at load time (GPUMEMPROF_FRAMEWORK_ENV), "NAME=value" each.
    std::vector<std::string> framework_env;
    /// Where each device's memory went (the driver's used figure, split).
    std::vector<DeviceAccountingSummary> accounting;
    /// What each device held at each OOM (the first kMaxOomSplits), in the order of the OOMs.
    std::vector<OomSplit> oom_splits;

    /// Attached to PyTorch's caching allocator on some device (a summary of its allocator).
    bool torch_attached() const {
        return std::any_of(devices.begin(), devices.end(),
                           [](const DeviceSummary& d) { return d.allocator == "pytorch"; });
    }
};

} // namespace gpumemprof::report
