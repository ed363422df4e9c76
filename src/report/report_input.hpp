// SPDX-License-Identifier: MIT
// What the core hands the report writers besides the recorder's data: identity of the run and
// each device's memory_stats.
#pragma once

#include "pool/device_pool.hpp"
#include "stats/device_stats.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumemprof::report {

struct DeviceSummary {
    int device = 0;
    stats::DeviceStats stats;
    std::int64_t invalid_frees = 0;
    std::size_t total_capacity = 0;
    pool::ReservedPeak at_reserved_peak; ///< the pool when its reserved bytes peaked
    /// PyTorch's allocator on the same requests (pool::PoolModel), when GPUMEMPROF_MODEL is on.
    bool has_model = false;
    stats::DeviceStats model;
    std::int64_t model_unserved = 0;
    pool::ReservedPeak model_at_reserved_peak;
};

struct ReportInput {
    std::string prefix;         ///< files are <prefix>.txt, <prefix>.folded, <prefix>.alloc.folded
    int pid = 0;
    std::string exe;
    double seconds_profiled = 0;
    std::string alloc_conf;     ///< GPUMEMPROF_ALLOC_CONF as given (for OOM advice)
    std::vector<DeviceSummary> devices;
    int top_n = 10;             ///< rows in the "top call sites" tables
    /// Module-name substrings dropped from the top of stacks; empty = GPUMEMPROF_STACK_SKIP or
    /// its default.
    std::vector<std::string> stack_skip;
    /// Frames the .txt stack listings leave out (FrameFilter syntax); unset = GPUMEMPROF_HIDE_FRAMES
    /// or its default.
    std::optional<std::string> hide_frames;
    /// Set when GPUMEMPROF_DUMP_SIGNAL could not be taken (e.g. "signal 12 is not taken: the
    /// program handles it"): the .txt says so under its header.
    std::string dump_signal_note;
};

} // namespace gpumemprof::report
