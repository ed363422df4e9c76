// SPDX-License-Identifier: MIT
// Out-of-memory notices for observers outside the hook (the Python package's
// attach_out_of_memory_observer): each OOM is appended to a list and announced on an eventfd.
// The hook never calls anything of the observer's: it often runs without the GIL and under the
// framework's allocator lock, where calling into Python could deadlock.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace gpumemprof::core {

struct OomNotice {
    int device = 0;
    std::int64_t requested = 0;        ///< bytes the program asked for
    std::int64_t device_allocated = 0; ///< allocated_bytes.all.current of the pool at the failure
    std::int64_t device_free = 0;      ///< free bytes the device reported
};

class OomNotices {
public:
    static OomNotices& instance();

    /// Called by the pool's listener (under the pool's lock): no allocation beyond amortised list
    /// growth, no call out; one write(2) on the eventfd.
    void add(const OomNotice& n) noexcept;
    /// OOMs so far in this process (a forked child starts at 0).
    std::int64_t count() const noexcept;
    /// The index-th OOM (0-based); false when not kept (beyond the first kMaxKept).
    bool get(std::int64_t index, OomNotice* out) const noexcept;
    /// An eventfd that becomes readable after each OOM (created on first use); -1 on failure.
    int fd() noexcept;
    void reset_after_fork() noexcept;

    static constexpr std::size_t kMaxKept = 100000;

private:
    mutable std::mutex mutex_;
    std::vector<OomNotice> kept_;
    std::int64_t count_ = 0;
    int fd_ = -1;
};

} // namespace gpumemprof::core
