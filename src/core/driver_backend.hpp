// SPDX-License-Identifier: MIT
// pool::Backend over the real driver for one context. A fence covers the legacy default stream
// (which orders after all prior work of every blocking stream, the per-thread default streams
// included) and every live non-blocking stream of the context: a join stream of ours waits for
// each of them, and the fence is one event recorded there.
#pragma once

#include "core/driver_api.hpp"
#include "core/stream_registry.hpp"
#include "pool/backend.hpp"

#include "core/cuda_api.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpumemprof::core {

class DriverBackend final : public pool::Backend {
public:
    DriverBackend(const DriverApi& api, CUcontext ctx, StreamRegistry& streams);
    ~DriverBackend() override = default; // events are left to the context's own teardown

    int allocate(std::size_t size, std::uintptr_t* ptr) override;
    int release(std::uintptr_t ptr, std::size_t size) override;
    int memory_info(std::size_t* free_bytes, std::size_t* total_bytes) override;
    pool::FenceId fence_record() override;
    bool fence_done(pool::FenceId fence) override;
    bool fence_wait(pool::FenceId fence) override;
    bool fence_wait_for(pool::FenceId fence, std::uint64_t limit_ns) override;
    void fence_release(pool::FenceId fence) override;
    bool synchronize() override;
    bool frees_ordered() override;

    // Expandable segments: the real driver's cuMem* calls (never our hooks), on this context's device.
    int vmm_granularity(std::size_t* bytes) override;
    int address_reserve(std::size_t size, std::uintptr_t* va) override;
    int address_free(std::uintptr_t va, std::size_t size) override;
    int page_create(std::size_t size, pool::PageHandle* page) override;
    int page_release(pool::PageHandle page) override;
    int page_map(std::uintptr_t va, std::size_t size, pool::PageHandle page) override;
    int page_unmap(std::uintptr_t va, std::size_t size) override;
    int set_access(std::uintptr_t va, std::size_t size) override;

    /// Forget all events without driver calls (the context is gone, or we are in a fork child).
    void forget();
    /// Device memory the driver took for the profiler's own join stream (the driver's used
    /// figure across its creation; 0 before it exists): the device accounting names it.
    std::int64_t own_stream_bytes() const { return own_stream_bytes_.load(std::memory_order_relaxed); }

private:
    /// One fence: its event on the join stream. Slots and events are reused, so recording a
    /// fence allocates nothing in steady state.
    struct Fence {
        pool::FenceId id = 0; ///< 0: free slot
        CUevent event = nullptr;
    };
    CUevent take_event();
    bool make_join_stream();          // requires mutex_ and the context current
    std::size_t take_slot();          // requires mutex_; may allocate (slot growth only)
    Fence* find(pool::FenceId fence); // requires mutex_
    /// The context's device ordinal (-1 when it cannot be had).
    int device();
    const DriverApi& api_;
    CUcontext ctx_;
    StreamRegistry& streams_;
    std::mutex mutex_; // guards the members below (fences are used under the pool lock anyway)
    std::vector<CUevent> spare_events_;
    std::vector<Fence> fences_;
    std::vector<std::size_t> free_slots_;
    std::vector<CUevent> scratch_orphans_; ///< reused by fence_record
    CUstream join_ = nullptr;              ///< the profiler's own non-blocking stream
    CUevent mark_ = nullptr;               ///< recorded on each covered stream in turn
    std::atomic<std::int64_t> own_stream_bytes_{0};
    std::uint64_t next_fence_ = 1;
    int device_ = -1; ///< cached by device()
};

} // namespace gpumemprof::core
