// SPDX-License-Identifier: MIT
// The driver's memory pools that stream-ordered allocations (cudaMallocAsync) come from, and what
// they keep reserved. A pool keeps freed memory up to its release threshold (PyTorch's
// cudaMallocAsync backend sets it to the maximum), so after the frees the device's used figure
// stays where the allocations took it: the device accounting names that part with this.
#pragma once

#include "core/driver_api.hpp"

#include <atomic>
#include <cstdint>

namespace gpumemprof::core {

class AsyncPools {
public:
    /// A pool an allocation named (cuMemAllocFromPoolAsync): remembered, with the current
    /// context's device, the first time it is seen. Lock-free; at most kMaxPools are kept.
    void note_pool(const DriverApi& api, CUmemoryPool pool) noexcept;
    /// A stream-ordered allocation was made: the devices' pools are asked from now on (one load,
    /// and one store the first time).
    void note_allocation() noexcept {
        if (!used_.load(std::memory_order_relaxed))
            used_.store(true, std::memory_order_relaxed);
    }
    /// What the device's pools keep reserved now (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, allocated
    /// and free): its current and default pools and those noted for it, each once. -1 before any
    /// stream-ordered allocation or when the driver does not answer. Asks the driver: not during
    /// a stream capture, not in teardown (the callers' rules).
    std::int64_t reserved(const DriverApi& api, int device) const noexcept;

    static constexpr int kMaxPools = 32;

private:
    struct Noted {
        std::atomic<CUmemoryPool> pool{nullptr};
        std::atomic<int> device{-1};
    };
    Noted pools_[kMaxPools];
    std::atomic<int> count_{0};
    std::atomic<bool> used_{false};
};

} // namespace gpumemprof::core
