// SPDX-License-Identifier: MIT
// `gpumemprof replay --sweep`: replay one plan under a grid of allocator settings on all cores and
// rank the outcomes.
#pragma once

#include "tools/replay.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpumemprof::tools {

struct SweepEntry {
    std::string label; ///< canonical PYTORCH_CUDA_ALLOC_CONF text, "" = PyTorch defaults
    pool::AllocConf conf;
    int keys = 0;          ///< non-default keys: fewer wins a tie
    bool recorded = false; ///< the settings the trace was recorded with
    Totals totals;
};

/// Settings that can change the outcome for this plan: max_split_size_mb (unset, then 20 and powers
/// of two up to the largest segment the trace needs), roundup_power2_divisions (unset, 2, 4, 8, 16,
/// [256:1,512:2,1024:4,>:8]), max_non_split_rounding_mb (20, 64, 256 up to the largest segment, only
/// with max_split_size_mb), and with a known capacity garbage_collection_threshold 0.6 / 0.8 at
/// per_process_memory_fraction 1.0. `recorded_conf` (if not empty and valid) is added too.
std::vector<SweepEntry> sweep_grid(const Plan& plan, bool capacity_known, const std::string& recorded_conf);

/// Replay every entry (jobs threads; 0 = hardware_concurrency) and fill its totals.
/// `progress(done, total)` is called from the calling thread about every `progress_every_s`.
void run_sweep(const Plan& plan, std::vector<SweepEntry>& entries, std::uint64_t capacity, unsigned jobs,
               const std::function<void(std::size_t, std::size_t)>& progress, double progress_every_s);

/// Best first: fewest OOMs, then lowest peak reserved, then fewest device allocations, then fewest
/// keys (so the defaults win when nothing helps), then grid order.
void rank(std::vector<SweepEntry>& entries);

} // namespace gpumemprof::tools
