// SPDX-License-Identifier: MIT
#include "core/async_pools.hpp"

#include <algorithm>

namespace gpumemprof::core {

void AsyncPools::note_pool(const DriverApi& api, CUmemoryPool pool) noexcept {
    if (pool == nullptr)
        return;
    const int n = count_.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
        if (pools_[i].pool.load(std::memory_order_acquire) == pool)
            return;
    CUdevice dev = 0;
    if (!api.cuCtxGetDevice || api.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return;
    const int slot = count_.fetch_add(1, std::memory_order_acq_rel);
    if (slot >= kMaxPools) {
        count_.store(kMaxPools, std::memory_order_release);
        return;
    }
    // Two threads noting the same new pool keep it twice: reserved() asks each pool once.
    pools_[slot].device.store(static_cast<int>(dev), std::memory_order_relaxed);
    pools_[slot].pool.store(pool, std::memory_order_release);
}

std::int64_t AsyncPools::reserved(const DriverApi& api, int device) const noexcept {
    if (device < 0 || !used_.load(std::memory_order_relaxed) || !api.cuMemPoolGetAttribute)
        return -1;
    CUmemoryPool asked[kMaxPools + 2] = {};
    int n = 0;
    CUmemoryPool p = nullptr;
    if (api.cuDeviceGetMemPool && api.cuDeviceGetMemPool(&p, device) == CUDA_SUCCESS)
        asked[n++] = p;
    if (api.cuDeviceGetDefaultMemPool && api.cuDeviceGetDefaultMemPool(&p, device) == CUDA_SUCCESS)
        asked[n++] = p;
    const int noted = std::min(count_.load(std::memory_order_acquire), kMaxPools);
    for (int i = 0; i < noted; ++i)
        if (pools_[i].device.load(std::memory_order_relaxed) == device)
            asked[n++] = pools_[i].pool.load(std::memory_order_acquire);
    std::int64_t total = 0;
    bool answered = false;
    for (int i = 0; i < n; ++i) {
        if (asked[i] == nullptr)
            continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; ++j)
            seen = asked[j] == asked[i];
        cuuint64_t bytes = 0;
        if (seen || api.cuMemPoolGetAttribute(asked[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &bytes) != CUDA_SUCCESS)
            continue;
        total += static_cast<std::int64_t>(bytes);
        answered = true;
    }
    return answered ? total : -1;
}

} // namespace gpumemprof::core
