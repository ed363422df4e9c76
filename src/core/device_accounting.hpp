// SPDX-License-Identifier: MIT
// Where the device's memory went: the driver's own "used" figure (cuMemGetInfo: total - free)
// split into what we can name: the caching pool's allocated and cached bytes (PyTorch's when
// attached, ours otherwise), private pools, stream-ordered and VMM memory by library, other
// libraries' allocations, the context and the modules loaded before the first allocation, and
// the rest, unexplained. Readings are taken when the device obtained or gave back memory and our
// accounted total moved by a step since the last one (up or down), at each OOM, and once at
// exit; the reading with the largest used figure is the peak's. The readings over time are kept
// (bounded) for the reports' stacked view.
#pragma once

#include "report/report_input.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::core {

using AccountingReading = report::AccountingMoment;

/// A pool or mirror obtained device memory on this thread (called under its lock): the caller
/// takes a reading once the lock is released (Profiler::account_if_acquired).
void note_device_memory_acquired(int device) noexcept;
/// The same when it gave memory back.
void note_device_memory_released(int device) noexcept;
/// The memory given back on this thread is not back with the driver yet (PyTorch reports a
/// segment's free before it frees it): the next Profiler::account_if_acquired leaves its reading
/// to the one after.
void hold_release_readings() noexcept;
/// An OOM on this thread (called under the pool's or mirror's lock): the caller splits the
/// device's memory once the lock is released. `seq`: the OOM's record (stacks::OomRecord::seq;
/// 0, not kept: nothing is done); `device_free`/`device_total`: the pool's figures at the failure,
/// used when the driver cannot be asked then (total 0: unknown).
void note_oom(int device, std::uint64_t seq, std::size_t device_free, std::size_t device_total) noexcept;

class DeviceAccounting {
public:
    struct Device {
        bool has_baseline = false;
        std::int64_t baseline = 0; ///< used before our first allocation: context and modules
        bool has_peak = false, has_exit = false;
        AccountingReading peak, exit;
        std::vector<AccountingReading> history; ///< bounded: every reading kept, then every other; exit last
        bool exit_in_history = false;
        std::int64_t last_accounted = 0;
        int readings = 0;
    };

    void set_baseline(int device, std::int64_t used);
    bool has_baseline(int device) const;
    std::int64_t baseline(int device) const;
    /// A reading is due once the accounted total moved by 4 MiB or 1% since the last one.
    bool due(int device, std::int64_t accounted) const;
    /// `accounted`: the total due() was given for this reading. The buckets read with the
    /// driver's figure (what the stream-ordered pools keep) are not part of it: a total that
    /// counted them would be compared with one that does not, and every call would be due.
    void add(int device, AccountingReading r, std::int64_t accounted);
    void set_exit(int device, AccountingReading r);
    std::map<int, Device> snapshot() const;
    /// What a device held at an OOM (the first kMaxOomSplits are kept).
    void add_oom(report::OomSplit s);
    std::vector<report::OomSplit> oom_splits() const;
    void clear();

    static constexpr std::size_t kMaxHistory = 512;
    static constexpr std::size_t kMaxOomSplits = 1000;

private:
    static void note_peak(Device& d, const AccountingReading& r); ///< requires mutex_
    mutable std::mutex mutex_;
    std::map<int, Device> devices_;
    std::vector<report::OomSplit> ooms_;
};

} // namespace gpumemprof::core
