// SPDX-License-Identifier: MIT
#include "core/device_accounting.hpp"

#include <algorithm>

namespace gpumemprof::core {

void DeviceAccounting::set_baseline(int device, std::int64_t used) {
    std::lock_guard lock(mutex_);
    Device& d = devices_[device];
    if (!d.has_baseline) {
        d.has_baseline = true;
        d.baseline = used;
    }
}

bool DeviceAccounting::has_baseline(int device) const {
    std::lock_guard lock(mutex_);
    auto it = devices_.find(device);
    return it != devices_.end() && it->second.has_baseline;
}

std::int64_t DeviceAccounting::baseline(int device) const {
    std::lock_guard lock(mutex_);
    auto it = devices_.find(device);
    return it != devices_.end() ? it->second.baseline : 0;
}

bool DeviceAccounting::due(int device, std::int64_t accounted) const {
    std::lock_guard lock(mutex_);
    auto it = devices_.find(device);
    if (it == devices_.end() || it->second.readings == 0)
        return true;
    const std::int64_t last = it->second.last_accounted;
    const std::int64_t step = std::max<std::int64_t>(4 << 20, last / 100);
    return accounted >= last + step || accounted <= last - step;
}

void DeviceAccounting::note_peak(Device& d, const AccountingReading& r) {
    if (!d.has_peak || r.driver_used > d.peak.driver_used) {
        d.peak = r;
        d.has_peak = true;
    }
}

void DeviceAccounting::add(int device, AccountingReading r, std::int64_t accounted) {
    std::lock_guard lock(mutex_);
    Device& d = devices_[device];
    d.last_accounted = accounted;
    ++d.readings;
    note_peak(d, r);
    r.pool_sites.clear(); // the history keeps the buckets only
    if (d.history.size() >= kMaxHistory) {
        std::vector<AccountingReading> kept;
        for (std::size_t i = 0; i < d.history.size(); i += 2)
            kept.push_back(std::move(d.history[i]));
        d.history = std::move(kept);
    }
    d.history.push_back(std::move(r));
}

void DeviceAccounting::set_exit(int device, AccountingReading r) {
    std::lock_guard lock(mutex_);
    Device& d = devices_[device];
    note_peak(d, r);
    d.exit = r;
    d.has_exit = true;
    // The history ends at exit (one exit reading: a second replaces the first).
    r.pool_sites.clear();
    if (d.exit_in_history && !d.history.empty())
        d.history.back() = std::move(r);
    else
        d.history.push_back(std::move(r)); // add() keeps at most kMaxHistory before it
    d.exit_in_history = true;
}

std::map<int, DeviceAccounting::Device> DeviceAccounting::snapshot() const {
    std::lock_guard lock(mutex_);
    return devices_;
}

void DeviceAccounting::add_oom(report::OomSplit s) {
    std::lock_guard lock(mutex_);
    if (ooms_.size() < kMaxOomSplits)
        ooms_.push_back(std::move(s));
}

std::vector<report::OomSplit> DeviceAccounting::oom_splits() const {
    std::lock_guard lock(mutex_);
    return ooms_;
}

void DeviceAccounting::clear() {
    std::lock_guard lock(mutex_);
    devices_.clear();
    ooms_.clear();
}

} // namespace gpumemprof::core
