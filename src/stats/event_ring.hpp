// SPDX-License-Identifier: MIT
// The latest pool events of one device, in the order they happened: what PyTorch's snapshot
// calls the device trace (alloc, free_requested, free_completed, segment_alloc, segment_free,
// oom), each with its time and call site. Bounded: once full, each new event overwrites the
// oldest (PyTorch's max_entries rule), and the number overwritten is counted. Storage sized once, at
// construction. Not thread-safe (the owner serialises; the pool's listener runs under its lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>
#include <vector>

namespace gpumemprof::stats {

enum class PoolAction : std::uint8_t {
    alloc,
    free_requested,
    free_completed,
    segment_alloc,
    segment_free,
    oom,
    segment_map,
    segment_unmap, ///< expandable segments: pages mapped / unmapped
};
inline constexpr const char* kPoolActionNames[] = {"alloc",         "free_requested", "free_completed",
                                                   "segment_alloc", "segment_free",   "oom",
                                                   "segment_map",   "segment_unmap"};

struct PoolEvent {
    std::int64_t t_ns = 0;        ///< since the process started
    std::uint64_t addr = 0;       ///< oom: the device's free bytes (PyTorch's device_free)
    std::uint64_t size = 0;       ///< bytes requested, or segment bytes (oom: the request)
    std::uint64_t block_size = 0; ///< bytes the block occupies in the pool (segments: = size)
    std::uint64_t stream = 0;
    std::uint32_t site = 0; ///< stacks::StackId of the request (0: none)
    PoolAction action = PoolAction::alloc;
};

static_assert(std::is_trivially_copyable_v<PoolEvent> && std::is_trivially_destructible_v<PoolEvent>);

class EventRing {
public:
    static constexpr std::size_t kDefaultCapacity = 65536; ///< 65536 x 48 B = 3 MiB at most

    /// The storage is obtained once, here, zeroed by the system and untouched (pages become
    /// resident as events fill them); if it cannot be had, the ring keeps nothing.
    explicit EventRing(std::size_t capacity = kDefaultCapacity)
        : slots_(capacity ? static_cast<PoolEvent*>(std::calloc(capacity, sizeof(PoolEvent))) : nullptr),
          capacity_(slots_ ? capacity : 0) {}

    /// A fixed-size copy into the next slot: no allocation, no division.
    void push(const PoolEvent& e) noexcept {
        if (capacity_ == 0)
            return;
        slots_[next_] = e;
        ++pushed_;
        if (++next_ == capacity_)
            next_ = 0;
    }
    /// Oldest first.
    std::vector<PoolEvent> events() const {
        if (pushed_ <= capacity_)
            return std::vector<PoolEvent>(slots_.get(), slots_.get() + pushed_);
        std::vector<PoolEvent> out;
        out.reserve(capacity_);
        out.insert(out.end(), slots_.get() + next_, slots_.get() + capacity_);
        out.insert(out.end(), slots_.get(), slots_.get() + next_);
        return out;
    }
    std::uint64_t overwritten() const { return pushed_ > capacity_ ? pushed_ - capacity_ : 0; }
    std::size_t capacity() const { return capacity_; }

private:
    struct Free {
        void operator()(PoolEvent* p) const noexcept { std::free(p); }
    };
    // PoolEvent is an implicit-lifetime aggregate: calloc's zeroed bytes are valid events.
    std::unique_ptr<PoolEvent[], Free> slots_;
    std::size_t capacity_;
    std::size_t next_ = 0;     ///< the slot the next event goes to (the oldest once full)
    std::uint64_t pushed_ = 0; ///< events pushed in all
};

} // namespace gpumemprof::stats
