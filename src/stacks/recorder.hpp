// SPDX-License-Identifier: MIT
// The process-wide stack recorder: captures and interns call stacks on the hot path and keeps
// per-call-site accounting that the exit reports are written from.
#pragma once

#include "pool/device_pool.hpp"
#include "stacks/backtrace.hpp"
#include "stacks/report_data.hpp"
#include "stacks/site_table.hpp"
#include "stacks/trace_tree.hpp"
#include "util/cycle_clock.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace gpumemprof::stacks {

inline constexpr int kDefaultStackDepth = 64;

namespace detail {
struct CaptureCounters;
struct CountersFreeList;
} // namespace detail

/// One per process, thread-safe, never throws. Two locks, never nested with each other and
/// never calling out: the trace tree's (capture) and the accounting's (on_* and collect).
class Recorder {
public:
    static Recorder& instance() {
        // Deliberately leaked: hooks may run during static destruction (frees in other objects'
        // destructors) and the exit report must still see a live recorder. Inline: the hot path
        // asks for it on every allocation and free.
        static Recorder* r = new Recorder();
        return *r;
    }

    Recorder();
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    /// GPUMEMPROF_STACK_DEPTH: frames kept per stack (clamped to kMaxFrames); 0 turns capture off.
    /// May be called at any time (gpumemprof_set_stack_depth) and returns the previous depth.
    /// Once capture has been on, the call-site accounting stays on: allocations made while it is
    /// off again are counted under "no stack" (id 0), so totals, peak and leaks stay whole.
    int configure(int max_depth) noexcept;
    int max_depth() const noexcept { return max_depth_.load(std::memory_order_relaxed); }

    /// Unwinds the calling thread and interns the stack. The first frame kept is the caller of
    /// capture(). Call it outside any pool lock. Returns 0 when capture is off or fails.
    /// Inline (always, so that the frames kept start at the caller): with capture off it costs a
    /// load and a test.
    __attribute__((always_inline)) StackId capture() noexcept {
        return max_depth_.load(std::memory_order_relaxed) > 0 ? capture_now(1) : 0;
    }

    /// capture() for an allocation of `requested` bytes. The same as capture() unless sampling
    /// is on; then it unwinds for every allocation of sample_always_from() bytes or more, and for
    /// each smaller one with probability 1/N (N = sample_one_in(), drawn independently per
    /// allocation, so that a loop's fixed order of allocations cannot hide a site). A sampled
    /// smaller allocation counts N times in its site's bytes and counts; one not sampled gets 0
    /// and counts in no site. The process-wide totals, peak and live blocks stay exact.
    /// on_alloc must then be called on the same thread with the id returned here (the core does:
    /// capture, then the pool's listener accounts the block).
    __attribute__((always_inline)) StackId capture(std::size_t requested) noexcept {
        if (max_depth_.load(std::memory_order_relaxed) <= 0)
            return 0;
        const std::uint32_t one_in = one_in_.load(std::memory_order_relaxed);
        if (one_in <= 1)
            return capture_now(1);
        const std::uint32_t weight = sample(requested, one_in);
        return weight != 0 ? capture_now(weight) : 0;
    }

    /// Sampling (GPUMEMPROF_SAMPLE): one_in <= 1 turns it off (the default). Allocations of
    /// `always_from` bytes or more always get a stack.
    void set_sampling(std::size_t always_from, std::uint32_t one_in) noexcept;
    std::uint32_t sample_one_in() const noexcept { return one_in_.load(std::memory_order_relaxed); }
    std::size_t sample_always_from() const noexcept { return always_from_.load(std::memory_order_relaxed); }
    /// Interns an already-captured stack (innermost first). For tests and for replay tools.
    StackId intern(const std::uintptr_t* ips, int n) noexcept;

    // Accounting: called by the core, possibly under a pool lock; never calls back. All three
    // do nothing while capture is off (configure(0)); OOMs are always kept.
    /// A block handed to the program (pooled or passthrough); size = bytes it occupies.
    void on_alloc(int device, std::uintptr_t ptr, std::size_t size, std::size_t requested, StackId id) noexcept {
        if (accounting_.load(std::memory_order_relaxed)) // capture never on: no call sites, no lock
            account_alloc(device, ptr, size, requested, id);
    }
    /// The program freed the block at ptr (unknown pointers are counted and ignored). Returns
    /// the block's call site (0: unknown pointer, or accounting off).
    StackId on_free(int device, std::uintptr_t ptr) noexcept {
        return accounting_.load(std::memory_order_relaxed) ? account_free(device, ptr) : 0;
    }
    /// The pool obtained a segment of `bytes` from the driver while serving a request under `id`.
    void on_acquire(int device, std::size_t bytes, StackId id) noexcept;
    /// An allocation failed; `suggestion` is the concrete advice printed with it.
    void on_oom(int device, const pool::OomInfo& info, StackId id, std::string suggestion) noexcept;

    /// pthread_atfork support: prepare takes both locks so that no update is half-done at fork;
    /// the parent and the child release them; the child calls reset_after_fork before it records.
    void lock_for_fork() noexcept;
    void unlock_after_fork() noexcept;
    /// In a forked child: forget the parent's call-site accounting (totals, live blocks, peak),
    /// OOMs and capture counters; keep the trace tree (ids are only names of stacks).
    /// Frees memory: not from an atfork handler.
    void reset_after_fork() noexcept;

    /// A consistent copy for the report writers (frames filled in, unsymbolised). With
    /// `site_frames` false the sites' frames are left empty (read them with frames(id) one at a
    /// time: a million sites' frames would be copied at once otherwise); OOMs keep theirs.
    ReportData collect(bool site_frames = true) const;
    /// What is live on `device` now, by call site (empty while accounting is off).
    std::vector<std::pair<StackId, std::int64_t>> live_by_site(int device) const noexcept;

    /// Frames of one id, innermost first.
    std::vector<std::uintptr_t> frames(StackId id) const { return tree_.frames(id); }
    std::size_t tree_size() const { return tree_.size(); }
    /// The cost of capture() so far (also part of collect()).
    CaptureStats capture_stats() const noexcept;

private:
    StackId capture_now(std::uint32_t weight) noexcept;
    StackId unwind_and_intern() noexcept;
    /// The sampling draw for one allocation: its weight (1 or one_in) or 0 (not sampled).
    std::uint32_t sample(std::size_t requested, std::uint32_t one_in) noexcept;
    /// The weight on_alloc gives the block capture(requested) was called for (1 without sampling).
    std::uint32_t weight_of(StackId id) noexcept;
    void account_alloc(int device, std::uintptr_t ptr, std::size_t size, std::size_t requested, StackId id) noexcept;
    StackId account_free(int device, std::uintptr_t ptr) noexcept;

    std::atomic<int> max_depth_{kDefaultStackDepth};
    std::atomic<bool> accounting_{true}; ///< false only while capture has never been on
    std::atomic<std::uint32_t> one_in_{0};
    std::atomic<std::size_t> always_from_{std::size_t{1} << 20};
    TraceTree tree_;
    util::CycleClock clock_;
    /// capture()'s counters live in one block per thread (recorder.cpp), summed by capture_stats:
    /// no shared cache line written on the hot path. Blocks are never freed: a thread's exit puts
    /// its block on a free list (no lock, no recorder needed) for the next new thread.
    detail::CaptureCounters* stats_block() noexcept;
    const std::uint64_t id_;         ///< tells this recorder's per-thread state from another one's
    mutable std::mutex stats_mutex_; ///< taken to reuse a block from the free list
    std::atomic<detail::CaptureCounters*> stats_head_{nullptr}; ///< every block (push only)
    detail::CountersFreeList* free_blocks_ = nullptr;           ///< allocated once, never freed (outlives the recorder)
    mutable std::mutex mutex_;                                  ///< guards table_ and ooms_
    SiteTable table_;
    std::vector<OomRecord> ooms_;
};

} // namespace gpumemprof::stacks
