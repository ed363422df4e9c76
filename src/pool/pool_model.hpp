// SPDX-License-Identifier: MIT
// What PyTorch's caching allocator would report for the requests our pool serves. Our pool keeps
// a freed block until the device has passed the free (it cannot know which stream will use the
// memory next), so while the CPU runs ahead of the GPU it reserves more than PyTorch would, and
// its reserved/fragmentation figures partly describe us rather than the program. The model is a
// second DevicePool over a bookkeeping-only device that reuses a freed block at once, as PyTorch
// does within a stream, fed every allocation and free of the real pool in the real pool's order:
// the same code that `gpumemprof replay` runs, whose results match PyTorch's to the byte.
#pragma once

#include "pool/alloc_conf.hpp"
#include "pool/device_pool.hpp"
#include "pool/sim_backend.hpp"
#include "stats/device_stats.hpp"
#include "util/flat_map.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace gpumemprof::pool {

/// Thread-safe; never throws; touches no device memory.
class PoolModel {
public:
    /// `capacity`: the device's total memory (0: SimBackend's default), so that
    /// per_process_memory_fraction and the OOM path behave as on the device.
    PoolModel(const AllocConf& conf, int device, std::size_t capacity);

    /// The real pool handed out `real_ptr` for a request of `requested` bytes on `stream`.
    void on_alloc(std::uintptr_t real_ptr, std::size_t requested, std::uintptr_t stream) noexcept;
    /// The program freed `real_ptr` (unknown pointers are ignored).
    void on_free(std::uintptr_t real_ptr) noexcept;

    stats::DeviceStats stats() const;
    ReservedPeak reserved_peak() const;
    void reset_peak_stats();
    void reset_accumulated_stats();
    /// torch.cuda.empty_cache() on the model (the program called gpumemprof_empty_cache).
    void empty_cache();
    /// The context is gone: forget every block, as the real pool does.
    void drop_all();
    /// Requests the model could not serve (its own out-of-memory): each is left out of its figures.
    std::int64_t unserved() const;
    /// reserved_bytes.all.current of the model, cheaply (no stats copy, no lock).
    std::size_t reserved_bytes() const;

private:
    mutable std::mutex mutex_; ///< guards map_ and unserved_ (the pool has its own lock)
    SimBackend backend_;
    DevicePool pool_;
    util::FlatMap<std::uintptr_t> map_; ///< real pointer -> model pointer
    std::int64_t unserved_ = 0;
};

} // namespace gpumemprof::pool
