// SPDX-License-Identifier: MIT
// The latest pool events of one device, in the order they happened: what PyTorch's snapshot
// calls the device trace (alloc, free_requested, free_completed, segment_alloc, segment_free,
// oom), each with its time and call site. Bounded: once full, each new event overwrites the
// oldest (PyTorch's max_entries rule), and the number overwritten is counted. Not thread-safe
// (the owner serialises; the pool's listener runs under its lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumemprof::stats {

enum class PoolAction : std::uint8_t {
    alloc, free_requested, free_completed, segment_alloc, segment_free, oom,
    segment_map, segment_unmap, ///< expandable segments: pages mapped / unmapped
};
inline constexpr const char* kPoolActionNames[] = {"alloc",         "free_requested", "free_completed",
                                                   "segment_alloc", "segment_free",   "oom",
                                                   "segment_map",   "segment_unmap"};

struct PoolEvent {
    std::int64_t t_ns = 0;      ///< since the process started
    std::uint64_t addr = 0;     ///< oom: the device's free bytes (PyTorch's device_free)
    std::uint64_t size = 0;     ///< bytes requested, or segment bytes (oom: the request)
    std::uint64_t block_size = 0; ///< bytes the block occupies in the pool (segments: = size)
    std::uint64_t stream = 0;
    std::uint32_t site = 0;     ///< stacks::StackId of the request (0: none)
    PoolAction action = PoolAction::alloc;
};

class EventRing {
public:
    static constexpr std::size_t kDefaultCapacity = 65536; ///< 65536 x 48 B = 3 MiB at most

    explicit EventRing(std::size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

    void push(const PoolEvent& e) {
        if (capacity_ == 0)
            return;
        if (events_.size() < capacity_) {
            events_.push_back(e);
            return;
        }
        events_[head_] = e;
        head_ = head_ + 1 == capacity_ ? 0 : head_ + 1; // no division on the hot path
        ++overwritten_;
    }
    /// Oldest first.
    std::vector<PoolEvent> events() const {
        std::vector<PoolEvent> out;
        out.reserve(events_.size());
        out.insert(out.end(), events_.begin() + static_cast<std::ptrdiff_t>(head_), events_.end());
        out.insert(out.end(), events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(head_));
        return out;
    }
    std::uint64_t overwritten() const { return overwritten_; }
    std::size_t capacity() const { return capacity_; }

private:
    std::size_t capacity_;
    std::vector<PoolEvent> events_;
    std::size_t head_ = 0; ///< index of the oldest event once full
    std::uint64_t overwritten_ = 0;
};

} // namespace gpumemprof::stats
