// SPDX-License-Identifier: MIT
// `gpumemprof replay`: turn a trace into a compact list of alloc/free requests and run it through
// DevicePool on a simulated device.
#pragma once

#include "pool/alloc_conf.hpp"
#include "pool/device_pool.hpp"
#include "stats/device_stats.hpp"
#include "trace/format.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpumemprof::tools {

/// One request to replay. A slot names one allocation of the trace (its recorded pointer, while
/// it lived), so replay needs no pointer lookups: slot -> replayed pointer is a vector.
struct Op {
    std::uint64_t size = 0;   ///< alloc: requested bytes
    std::uint64_t stream = 0; ///< alloc: stream
    std::uint32_t slot = 0;
    std::uint16_t device = 0; ///< index into Plan::devices
    std::uint8_t is_free = 0;
    /// With Plan::frees_at_completion: 1 = the freed block becomes reusable here (the trace's
    /// free_completed); the free itself (is_free) is where the program freed it.
    std::uint8_t completes = 0;
};

/// What the trace itself says happened (from its segment and oom events), per device.
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

struct PlanDevice {
    std::uint32_t ordinal = 0;
    std::uint64_t recorded_capacity = 0; ///< from the trace header, 0 = unknown
    std::uint64_t live_blocks = 0;       ///< live_block events of this device
    /// (address, size) of each segment_alloc, in trace order: replay places its segments there
    /// when its requests match, so ties between equal free blocks break as on the device.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> segment_addresses;
    Recorded recorded;
};

struct Plan {
    trace::Header header;
    std::vector<PlanDevice> devices;
    std::vector<Op> ops;
    std::uint32_t slots = 0;
    std::uint64_t events = 0;          ///< events in the trace
    std::uint64_t live_blocks = 0;     ///< allocations that predate the recording (live_block)
    std::uint64_t unmatched_frees = 0; ///< frees of pointers the trace never allocated: skipped
    std::uint64_t realloc_of_live = 0; ///< alloc of a pointer still live in the trace (a lost free)
    std::uint64_t max_request = 0;     ///< largest requested size
    /// The trace has free_completed events: a block is freed at free_requested (the program's
    /// figures drop) and becomes reusable at free_completed, as in the run that recorded it.
    bool frees_at_completion = false;
    bool complete = false; ///< the trace had its end record
};

/// Read `path` into a plan. False with `*error` ("byte offset N: ...") on a bad trace. With
/// `allow_truncated`, a trace cut inside a block yields the plan of its complete blocks and a
/// warning in `*warning`.
bool load_plan(const std::string& path, bool allow_truncated, Plan* plan, std::string* error, std::string* warning);

struct DeviceResult {
    std::uint32_t ordinal = 0;
    std::uint64_t capacity = 0;
    stats::DeviceStats stats;
    pool::ReservedPeak at_reserved_peak; ///< the pool when its reserved bytes peaked
    std::uint64_t allocs = 0;            ///< alloc requests replayed
    std::uint64_t failed_allocs = 0;     ///< replayed requests that ran out of memory
    std::uint64_t skipped_frees = 0;     ///< frees of allocations that failed in the replay
};

struct ReplayOptions {
    pool::AllocConf conf;
    pool::Mode mode = pool::Mode::caching;
    std::uint64_t capacity = 0; ///< 0: the trace's capacity per device, else kDefaultCapacity
};

inline constexpr std::uint64_t kDefaultCapacity = 80ull << 30;
/// Devices one replay simulates at most (each costs a pool): far above any real node, and it
/// bounds the memory a trace can make replay use.
inline constexpr std::size_t kMaxReplayDevices = 1024;

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
