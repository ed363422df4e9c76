// SPDX-License-Identifier: MIT
// Where the device's memory went: the driver's own "used" figure (cuMemGetInfo: total - free)
// split into what we can name: the caching pool's allocated and cached bytes (PyTorch's when
// attached, ours otherwise), private pools, stream-ordered and VMM memory by library, other
// libraries' allocations, the context and the modules loaded before the first allocation, and
// the rest, unexplained. Readings are taken when the device obtained memory and our accounted
// total rose by a step since the last one, and once at exit; the reading with the largest used
// figure is the peak's.
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

class DeviceAccounting {
public:
    struct Device {
        bool has_baseline = false;
        std::int64_t baseline = 0; ///< used before our first allocation: context and modules
        bool has_peak = false, has_exit = false;
        AccountingReading peak, exit;
        std::vector<AccountingReading> history; ///< bounded: every reading kept, then every other
        std::int64_t last_accounted = 0;
        int readings = 0;
    };

    void set_baseline(int device, std::int64_t used);
    bool has_baseline(int device) const;
    std::int64_t baseline(int device) const;
    /// A reading is due once the accounted total rose by 4 MiB or 1% since the last one.
    bool due(int device, std::int64_t accounted) const;
    void add(int device, AccountingReading r);
    void set_exit(int device, AccountingReading r);
    std::map<int, Device> snapshot() const;
    void clear();

    static constexpr std::size_t kMaxHistory = 512;

private:
    mutable std::mutex mutex_;
    std::map<int, Device> devices_;
};

} // namespace gpumemprof::core
