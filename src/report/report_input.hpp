// SPDX-License-Identifier: MIT
// The snapshot the core hands the report writers (besides the recorder's data): taken at one
// moment, under the pool table's lock, so that the JSON and the .txt describe the same instant.
#pragma once

#include "pool/device_pool.hpp"
#include "pool/torch_mirror.hpp"
#include "stats/device_stats.hpp"
#include "stats/event_ring.hpp"
#include "stats/time_series.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
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

struct ReportInput {
    std::string prefix; ///< files are <prefix>.json, .txt, .folded, .alloc.folded
    int pid = 0;
    std::string host;
    std::string exe;
    double seconds_profiled = 0;
    std::string alloc_conf;           ///< GPUMEMPROF_ALLOC_CONF as given (for OOM advice)
    std::string effective_alloc_conf; ///< the settings in effect, every key spelled out
    bool caching = true;              ///< the pool caches (false: GPUMEMPROF_POOL=0)
    ReuseSummary reuse;
    DoorCounts doors;
    PassthroughCounters host_pinned;
    std::int64_t foreign_invalid_frees = 0;
    /// GPUMEMPROF_DUMP_SIGNAL: the signal (0 = none), whether our handler is installed, and why
    /// not ("the program handles it"): the JSON's "dump_signal" and a line in the .txt.
    int dump_signal = 0;
    bool dump_signal_installed = false;
    std::string dump_signal_refused;
    std::vector<DeviceSummary> devices; ///< one per pool, in table order
    /// Devices with pass-through memory but no pool (JSON only: context -1, ledger figures).
    std::vector<DeviceSummary> devices_without_pool;
    int top_n = 10; ///< rows in the "top call sites" tables
    /// Module-name substrings dropped from the top of stacks (GPUMEMPROF_STACK_SKIP, a
    /// comma-separated list); unset = kDefaultStackSkip.
    std::optional<std::string> stack_skip;
    /// Frames the .txt stack listings leave out (GPUMEMPROF_HIDE_FRAMES, FrameFilter syntax);
    /// unset = kDefaultHiddenFrames.
    std::optional<std::string> hide_frames;
    /// GPUMEMPROF_PYTHON: 0 native only, 1 Python frames merged, 2 merged and interpreter kept.
    int python_frames = 1;
    /// Variables the library set at load time (GPUMEMPROF_FRAMEWORK_ENV), "NAME=value" each.
    std::vector<std::string> framework_env;
};

} // namespace gpumemprof::report
