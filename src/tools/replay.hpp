// SPDX-License-Identifier: MIT
// `gpumemprof replay`: run a trace's alloc/free requests through DevicePool on simulated devices,
// reading the trace as it goes (a trace of any length replays in bounded memory).
#pragma once

#include "pool/alloc_conf.hpp"
#include "pool/device_pool.hpp"
#include "stats/device_stats.hpp"
#include "trace/format.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::tools {

/// What the trace itself says happened (from its segment and oom events), per device and context.
struct Recorded {
    /// Reserved bytes before the first event (header metadata "reserved_at_start.<device>", which
    /// the snapshot converter writes); recordings of gpumemprof itself start at 0.
    std::int64_t reserved_at_start = 0;
    bool baseline_known = false;
    std::int64_t reserved_peak = 0;   ///< reserved_at_start + segment_alloc/free and vmm_map/unmap
    std::int64_t requested_peak = 0;  ///< from alloc/live_block and the matching frees
    std::uint64_t segment_allocs = 0; ///< segment_alloc + vmm_map events
    std::uint64_t segment_frees = 0;
    std::uint64_t ooms = 0;
};

/// One pool of the recording: a device's context (trace version 3; every event of an older trace
/// is in context 0). Each replays to a pool of its own, as in the run; the contexts of a device
/// share its simulated memory.
struct PlanDevice {
    std::uint32_t ordinal = 0;
    std::uint64_t context = 0;
    std::uint64_t recorded_capacity = 0; ///< of the device, from the trace, 0 = unknown
    std::uint64_t live_blocks = 0;       ///< live_block events of this device and context
    Recorded recorded;
};

/// A trace read through once (validated) and once more for its figures: what a replay needs to
/// know before it streams the trace again. The events themselves are not held.
struct Plan {
    std::string path;
    trace::Header header;
    std::vector<PlanDevice> devices;   ///< header devices first (in their order), then by first event
    std::uint64_t events = 0;          ///< events in the trace (the usable ones: a replay reads these)
    std::uint64_t live_blocks = 0;     ///< allocations that predate the recording (live_block)
    std::uint64_t unmatched_frees = 0; ///< frees of pointers the trace never allocated: skipped
    std::uint64_t realloc_of_live = 0; ///< alloc of a pointer still live in the trace (a lost free)
    std::uint64_t max_request = 0;     ///< largest requested size
    /// The trace has free_completed events: a block is freed at free_requested (the program's
    /// figures drop) and becomes reusable at free_completed, as in the run that recorded it.
    bool frees_at_completion = false;
    bool complete = false; ///< the trace had its end record
    /// Per device ordinal: the end of its highest recorded segment (replay places its segments
    /// where the device did, reading their addresses from the trace as it goes).
    std::vector<std::pair<std::uint32_t, std::uint64_t>> segment_tops;
};

/// Read `path` into a plan: two passes, memory bounded by the allocations live at a time, not by
/// the trace's length. False with `*error` ("byte offset N: ...") on a bad trace. With
/// `allow_truncated`, a trace cut inside a block yields the plan of its complete blocks and a
/// warning in `*warning`.
bool load_plan(const std::string& path, bool allow_truncated, Plan* plan, std::string* error, std::string* warning);

struct DeviceResult {
    std::uint32_t ordinal = 0;
    std::uint64_t context = 0;
    std::uint64_t capacity = 0;
    stats::DeviceStats stats;
    pool::ReservedPeak at_reserved_peak; ///< the pool when its reserved bytes peaked
    std::uint64_t allocs = 0;            ///< alloc requests replayed
    std::uint64_t failed_allocs = 0;     ///< replayed requests that ran out of memory
    std::uint64_t skipped_frees = 0;     ///< frees of allocations that failed in the replay
    /// Replayed allocations handed out at another address than the trace recorded. The replay
    /// places segments where the trace's segment events did, so a replay that follows the
    /// recorded allocator hands out every block where it did: the first mismatch is where the
    /// two part (a rule that differs, or a request the trace does not show).
    std::uint64_t address_mismatches = 0;
    struct Divergence {
        std::uint64_t alloc_index = 0; ///< 0-based among this device's replayed requests (live blocks first)
        std::uint64_t requested = 0;
        std::uint64_t rounded = 0; ///< round_size under the replayed settings
        std::uint64_t recorded_ptr = 0;
        std::uint64_t replayed_ptr = 0;
    };
    Divergence first_mismatch; ///< valid when address_mismatches > 0
};

struct ReplayOptions {
    pool::AllocConf conf;
    pool::Mode mode = pool::Mode::caching;
    std::uint64_t capacity = 0; ///< 0: the trace's capacity per device, else kDefaultCapacity
};

inline constexpr std::uint64_t kDefaultCapacity = 80ull << 30;
/// Devices (contexts of devices) one replay simulates at most (each costs a pool): far above any
/// real node, and it bounds the memory a trace can make replay use.
inline constexpr std::size_t kMaxReplayDevices = 1024;

/// Stream the plan's trace through DevicePools on simulated devices (one pool per device and
/// context; a request with a private pool id goes to that private pool). Memory: the pools and
/// the allocations live at a time. Results in plan.devices' order. Throws std::bad_alloc when host
/// memory runs out, std::runtime_error when the trace cannot be read again as load_plan read it.
std::vector<DeviceResult> replay(const Plan& plan, const ReplayOptions& options);

/// Capacity used for a device: options.capacity, else the recorded one, else 80 GiB.
std::uint64_t capacity_for(const PlanDevice& device, std::uint64_t option_capacity);

/// Totals over devices used for ranking and the summary.
struct Totals {
    std::int64_t reserved_peak = 0;
    std::int64_t allocated_peak = 0;
    std::int64_t requested_peak = 0;
    std::int64_t inactive_split_bytes_peak = 0;
    std::int64_t segments_peak = 0;
    std::int64_t device_allocs = 0;
    std::int64_t device_frees = 0;
    std::int64_t ooms = 0;
    std::int64_t retries = 0;
    std::uint64_t failed_allocs = 0;
    std::uint64_t skipped_frees = 0;
};
Totals totals(const std::vector<DeviceResult>& results);

} // namespace gpumemprof::tools
