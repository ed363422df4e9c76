// SPDX-License-Identifier: MIT
// A simulated device for the pool: bookkeeping only (no memory is touched), deterministic addresses,
// a capacity limit, call counters and test knobs for fences. Used by unit tests and `gpumemprof replay`.
#pragma once

#include "pool/backend.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpumemprof::pool {

class SimBackend final : public Backend {
public:
    /// First segment address; every segment starts on a 2 MiB boundary and addresses are never reused
    /// (a stale pointer into a released segment is therefore never mistaken for a new one).
    static constexpr std::uintptr_t kBaseAddress = 0x7f0000000000;
    static constexpr std::size_t kAlignment = 2 * 1024 * 1024;

    explicit SimBackend(std::size_t capacity_bytes = std::size_t{80} << 30);

    int allocate(std::size_t size, std::uintptr_t* ptr) override;
    int release(std::uintptr_t ptr, std::size_t size) override;
    /// free = capacity - bytes held by live segments; total = capacity (or set_total()).
    int memory_info(std::size_t* free_bytes, std::size_t* total_bytes) override;

    FenceId fence_record() override;
    bool fence_done(FenceId fence) override;
    bool fence_wait(FenceId fence) override;
    bool fence_wait_for(FenceId fence, std::uint64_t limit_ns) override;
    void fence_release(FenceId fence) override;
    bool frees_ordered() override;

    /// Virtual memory: reservations start at kVmmBaseAddress and are never reused; pages are
    /// charged against the capacity from page_create to page_release, as the real driver does.
    static constexpr std::uintptr_t kVmmBaseAddress = 0x100000000000;
    int vmm_granularity(std::size_t* bytes) override;
    int address_reserve(std::size_t size, std::uintptr_t* va) override;
    int address_free(std::uintptr_t va, std::size_t size) override;
    int page_create(std::size_t size, PageHandle* page) override;
    int page_release(PageHandle page) override;
    int page_map(std::uintptr_t va, std::size_t size, PageHandle page) override;
    int page_unmap(std::uintptr_t va, std::size_t size) override;
    int set_access(std::uintptr_t va, std::size_t size) override;

    // ---- knobs (thread-safe) ------------------------------------------------------------------
    /// true: fences recorded from now on stay busy until complete_fences() or a fence_wait().
    void set_fences_busy(bool busy);
    /// Finish every fence recorded so far.
    void complete_fences();
    /// Finish the fences up to and including `fence` (a device that trails the host).
    void complete_fences_through(FenceId fence);
    /// The newest fence recorded (0: none yet).
    FenceId last_fence() const;
    /// false: fence_record() returns 0 ("cannot fence now", as during a stream capture).
    void set_fence_record_allowed(bool allowed);
    /// false: fence_wait() returns false without finishing the fence.
    void set_fence_wait_allowed(bool allowed);
    /// What frees_ordered() answers (default false: freed blocks wait for fences).
    void set_frees_ordered(bool ordered);
    /// true: fence_wait_for() runs out of time on a fence that is not done (default false: the
    /// wait lets the device run up to the fence, as fence_wait does).
    void set_waits_time_out(bool time_out);
    /// Replay: the segment addresses the recorded device gave, in order (address, size).
    /// allocate() takes the next one when its size matches and its range is free, so that ties
    /// between equal free blocks break as they did on the device; otherwise it places the
    /// segment above every planned address. Set before the first allocate().
    void set_address_plan(std::vector<std::pair<std::uintptr_t, std::size_t>> plan);
    /// The same plan read as it is needed (a long trace: not held in memory): `next` gives the
    /// next planned (address, size) and false when there is none; `top` is the end of the highest
    /// planned segment (unplanned ones go above it).
    using PlanSource = std::function<bool(std::pair<std::uintptr_t, std::size_t>*)>;
    void set_address_plan(PlanSource next, std::uintptr_t top);
    /// The next allocate() fails with `code` (once).
    void fail_next_allocate(int code);
    /// The page_create after `successes` more successful ones fails with `code` (once).
    void fail_page_create_after(std::size_t successes, int code);
    /// The next page_map fails with `code` (once).
    void fail_next_page_map(int code);
    /// cuMemGetAllocationGranularity's answer (default 2 MiB, as on current NVIDIA GPUs).
    void set_granularity(std::size_t bytes);
    /// Report this as the device's total in memory_info (default: the capacity).
    void set_total(std::size_t bytes);

    // ---- observations -------------------------------------------------------------------------
    struct Counters {
        std::uint64_t allocate_calls = 0;
        std::uint64_t allocate_failures = 0;
        std::uint64_t release_calls = 0;
        std::uint64_t bad_releases = 0; ///< release of an unknown address or with a wrong size
        std::uint64_t memory_info_calls = 0;
        std::uint64_t fence_records = 0;
        std::uint64_t fence_queries = 0;
        std::uint64_t fence_waits = 0;
        std::uint64_t bounded_waits = 0; ///< fence_wait_for calls
        std::uint64_t fence_releases = 0;
        std::uint64_t address_reserves = 0;
        std::uint64_t address_frees = 0;
        std::uint64_t page_creates = 0; ///< successful ones
        std::uint64_t page_releases = 0;
        std::uint64_t page_maps = 0; ///< successful ones
        std::uint64_t page_unmaps = 0;
        std::uint64_t set_accesses = 0;
        std::uint64_t vmm_failures = 0;  ///< VMM calls that failed (injected, or out of memory)
        std::uint64_t bad_vmm_calls = 0; ///< VMM calls the real driver would reject (a pool bug)
    };
    Counters counters() const;
    /// Lock-free (the PyTorch-allocator model's reserved bytes are read on every allocation).
    std::size_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
    std::size_t live_segments() const;
    std::size_t capacity() const;
    std::size_t mapped_bytes() const; ///< bytes mapped in reservations now
    std::size_t live_pages() const;   ///< pages created and not yet released
    std::size_t live_reservations() const;

private:
    mutable std::mutex mu_;
    std::size_t capacity_;
    std::size_t total_ = 0;            ///< 0: same as capacity
    std::atomic<std::size_t> used_{0}; ///< changed under mu_, read without it
    std::uintptr_t next_address_ = kBaseAddress;
    std::unordered_map<std::uintptr_t, std::size_t> live_;
    Counters counters_;
    int fail_next_ = 0;
    bool fences_busy_ = false;
    bool record_allowed_ = true;
    bool wait_allowed_ = true;
    bool frees_ordered_ = false;
    PlanSource plan_;
    std::pair<std::uintptr_t, std::size_t> planned_{}; ///< the plan's next entry, when have_planned_
    bool have_planned_ = false;
    bool waits_time_out_ = false;
    FenceId last_fence_ = 0;
    FenceId done_upto_ = 0; ///< every fence <= this is finished

    struct Page {
        std::size_t size = 0;
        bool mapped = false;
    };
    struct Mapping {
        std::size_t size = 0;
        PageHandle page = 0;
    };
    std::uintptr_t next_vmm_address_ = kVmmBaseAddress;
    std::map<std::uintptr_t, std::size_t> reservations_; ///< base -> size
    std::map<std::uintptr_t, Mapping> mappings_;         ///< va -> mapping
    std::unordered_map<PageHandle, Page> pages_;
    PageHandle next_page_ = 1;
    std::size_t mapped_ = 0;
    std::size_t granularity_ = std::size_t{2} << 20;
    std::size_t create_failure_countdown_ = 0;
    int create_failure_code_ = 0;
    int fail_next_map_ = 0;
};

} // namespace gpumemprof::pool
