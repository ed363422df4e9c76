// SPDX-License-Identifier: MIT
// The profiler's side of the device accounting (core/device_accounting.hpp): it knows the pools,
// the mirrors of PyTorch's allocator and the pass-through ledger, whose figures make the buckets,
// and it reads the driver's used figure at the moments the accounting asks for.
#include "core/pool_events.hpp"
#include "core/process_state.hpp"
#include "core/profiler.hpp"
#include "core/signals.hpp"
#include "stacks/recorder.hpp"

#include "util/swallowed.hpp"

#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

namespace gpumemprof::core {
namespace {

constexpr const char* kAsyncBucket = "stream-ordered (cudaMallocAsync, memory pools)";
constexpr const char* kAsyncCachedBucket =
    "stream-ordered memory pools: reserved, free (below their release threshold)";

// Set by a pool or mirror (under its lock) when it obtained device memory; the caller takes a
// reading once that lock is released.
thread_local int t_acquired_device __attribute__((tls_model("initial-exec"))) = -1;
// The same when it gave memory back; held while the caller says the driver has not freed it yet.
thread_local int t_released_device __attribute__((tls_model("initial-exec"))) = -1;
thread_local bool t_hold_release __attribute__((tls_model("initial-exec"))) = false;

// Set by a pool or mirror (under its lock) at an OOM: split once that lock is released.
struct PendingOom {
    std::uint64_t seq = 0; // 0: none
    int device = 0;
    std::size_t device_free = 0, device_total = 0;
};
thread_local PendingOom t_oom __attribute__((tls_model("initial-exec")));

// At exit the exiting thread may have been interrupted (exit() from a signal handler) inside
// the driver, holding its locks: the readings are taken on a thread of their own, waited for
// 300 ms at most; one that cannot finish is abandoned (the process ends anyway).
void exit_reading() {
    struct Done {
        std::mutex m;
        std::condition_variable cv;
        bool done = false;
    };
    try {
        auto done = std::make_shared<Done>();
        std::thread([done] {
            Profiler::instance().accounting_exit();
            std::lock_guard lock(done->m);
            done->done = true;
            done->cv.notify_all();
        }).detach();
        std::unique_lock lock(done->m);
        done->cv.wait_for(lock, std::chrono::milliseconds(300), [&] { return done->done; });
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

} // namespace

void note_device_memory_acquired(int device) noexcept {
    t_acquired_device = device;
}

void note_device_memory_released(int device) noexcept {
    t_released_device = device;
}

void hold_release_readings() noexcept {
    t_hold_release = true;
}

void note_oom(int device, std::uint64_t seq, std::size_t device_free, std::size_t device_total) noexcept {
    if (seq != 0)
        t_oom = PendingOom{seq, device, device_free, device_total};
}

void Profiler::accounting_baseline(const DriverApi& api, int device) noexcept {
    if (accounting_.has_baseline(device) || process_exiting())
        return;
    AccountingReading r;
    if (!read_driver_used(api, device, &r))
        return;
    accounting_.set_baseline(device, r.driver_used);
    static std::once_flag registered;
    // Before the teardown handler (registered at load time, so run after this one): the exit
    // reading still may ask the driver.
    std::call_once(registered, [] { std::atexit(exit_reading); });
}

void Profiler::account_if_acquired(const DriverApi& api) noexcept {
    if (t_oom.seq != 0) {
        // What the device held at the OOM: the buckets as a reading splits them (the driver's
        // figure read now, just after the failure, or the pool's when the driver may not be
        // asked) and PyTorch's live blocks by kind.
        const PendingOom o = t_oom;
        t_oom = {};
        try {
            report::OomSplit split;
            split.oom = o.seq;
            split.device = o.device;
            AccountingReading& r = split.accounting;
            accounting_buckets(o.device, &r);
            const bool capturing = streams_.captures.load(std::memory_order_acquire) > 0;
            if (!process_exiting() && !capturing && read_driver_used(api, o.device, &r)) {
                split.has_accounting = true;
            } else if (o.device_total > 0) {
                r.driver_used = static_cast<std::int64_t>(o.device_total - o.device_free);
                r.driver_total = static_cast<std::int64_t>(o.device_total);
                r.t_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_)
                             .count();
                split.has_accounting = true;
            }
            if (split.has_accounting)
                r.pool_sites = stacks::Recorder::instance().live_by_site(o.device);
            if (o.device >= 0 && o.device < kMaxTorchDevices)
                if (PoolSlot* s = torch_slots_[o.device].load(std::memory_order_acquire);
                    s && s->torch_ready.load(std::memory_order_acquire) && s->categories) {
                    const KindBytes k = s->categories->live_now();
                    for (int i = 0; i < kMemoryKinds; ++i)
                        split.kinds.emplace_back(memory_kind_name(static_cast<MemoryKind>(i)), k[i]);
                }
            accounting_.add_oom(std::move(split));
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
    }
    int device = t_acquired_device;
    t_acquired_device = -1;
    if (!t_hold_release) {
        if (device < 0)
            device = t_released_device;
        t_released_device = -1;
    }
    t_hold_release = false;
    if (device < 0)
        return;
    if (process_exiting() || streams_.captures.load(std::memory_order_acquire) > 0)
        return; // no driver call of ours may join a stream capture
    try {
        // The gate runs on every allocation that obtained memory (each cudaMallocAsync of a
        // library's stream-ordered pool): it totals the figures, and drains PyTorch's events,
        // names the buckets and asks the driver only when a reading is due. The total kept for
        // the next gate is this one, taken before the drain as the next will be: one taken after
        // it would differ by what the profiler's thread had still to handle, and make every call
        // due while that is 4 MiB or more.
        const std::int64_t checked = accounting_figures(device, false).total();
        if (!accounting_.due(device, checked))
            return;
        torch_drain(); // PyTorch's blocks as of now
        AccountingReading r;
        accounting_buckets(device, &r);
        if (!read_driver_used(api, device, &r))
            return;
        r.pool_sites = stacks::Recorder::instance().live_by_site(device);
        accounting_.add(device, std::move(r), checked);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

bool Profiler::read_driver_used(const DriverApi& api, int device, AccountingReading* r) noexcept {
    std::size_t free_bytes = 0, total = 0;
    CUdevice dev = 0;
    if (api.cuCtxGetDevice(&dev) != CUDA_SUCCESS || static_cast<int>(dev) != device ||
        api.cuMemGetInfo_v2(&free_bytes, &total) != CUDA_SUCCESS)
        return false;
    r->driver_used = static_cast<std::int64_t>(total - free_bytes);
    r->driver_total = static_cast<std::int64_t>(total);
    // What the device's memory pools keep beyond the live stream-ordered allocations (freed
    // memory below their release threshold; PyTorch's segments from a pool are live ones): the
    // driver's figure holds it.
    const std::int64_t async_live = ledger_.current_bytes(device, {Kind::async, Kind::torch_async});
    const std::int64_t reserved = async_pools_.reserved(api, device);
    if (reserved > async_live)
        r->buckets.emplace_back(kAsyncCachedBucket, reserved - async_live);
    r->t_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
    return true;
}

Profiler::AccountingFigures Profiler::accounting_figures(int device, bool in_step) const {
    AccountingFigures f;
    f.baseline = accounting_.baseline(device);
    pools_.for_each_live([&](PoolSlot* s) {
        if (s->device != device)
            return false;
        const stats::DeviceStats st = s->pool->stats();
        f.pool_allocated += st.allocated_bytes[stats::kAll].current;
        f.pool_cached += st.reserved_bytes[stats::kAll].current - st.allocated_bytes[stats::kAll].current;
        if (s->backend)
            f.own_streams += s->backend->own_stream_bytes();
        if (s->torch_ready.load(std::memory_order_acquire)) {
            f.attached = true;
            if (in_step)
                return false; // PyTorch's part comes from the ledger below: its stats are not read
            const stats::DeviceStats t = s->torch->stats();
            std::int64_t priv_reserved = 0, priv_allocated = 0;
            for (const pool::PrivatePoolBytes& p : s->torch->private_pools()) {
                priv_reserved += p.reserved;
                priv_allocated += p.allocated;
            }
            f.torch_allocated += t.allocated_bytes[stats::kAll].current - priv_allocated;
            f.torch_cached += t.reserved_bytes[stats::kAll].current - t.allocated_bytes[stats::kAll].current -
                              (priv_reserved - priv_allocated);
            f.torch_private += priv_reserved;
        }
        return false;
    });
    // A MemPool allocator's managed segments are in PyTorch's private pools, but not device memory
    // until their pages move there: the driver's figure holds those pages as any managed memory's,
    // in the unexplained part (its line says so).
    const auto kind = ledger_.current_by_kind(device);
    auto bytes = [&](Kind k) { return kind[static_cast<int>(k)]; };
    f.torch_private = std::max<std::int64_t>(0, f.torch_private - bytes(Kind::torch_managed));
    if (!f.attached || in_step)
        // Not attached (GPUMEMPROF_TORCH=off, or a version we do not know), or in step with the
        // driver's calls: its segments only.
        f.torch_segments = std::max<std::int64_t>(0, bytes(Kind::torch_segment) + bytes(Kind::torch_physical) +
                                                         bytes(Kind::torch_async));
    f.async = bytes(Kind::async);
    f.vmm_physical = bytes(Kind::vmm_physical);
    for (int c = 0; c < kFootprintCauses; ++c)
        f.footprint[c] = footprint_.bytes(device, static_cast<FootprintCause>(c));
    return f;
}

std::int64_t Profiler::AccountingFigures::total() const noexcept {
    // PyTorch's figures and its segments are never both set.
    std::int64_t sum = baseline + torch_allocated + torch_cached + torch_private + torch_segments + pool_allocated +
                       pool_cached + own_streams + async + vmm_physical;
    for (std::int64_t b : footprint)
        sum += b;
    return sum;
}

void Profiler::accounting_buckets(int device, AccountingReading* r, bool in_step) const {
    const AccountingFigures f = accounting_figures(device, in_step);
    auto add = [&](const char* name, std::int64_t bytes) {
        if (bytes != 0)
            r->buckets.emplace_back(name, bytes);
    };
    add("context and modules loaded before the first allocation", f.baseline);
    if (f.attached && !in_step) {
        add("PyTorch's caching allocator: allocated", f.torch_allocated);
        add("PyTorch's caching allocator: cached, free", f.torch_cached);
        add("PyTorch's private pools (CUDA graphs, MemPool)", f.torch_private);
    } else {
        add("PyTorch's caching allocator: segments", f.torch_segments);
    }
    add(f.attached ? "gpumemprof's pool (other libraries): allocated" : "gpumemprof's pool: allocated",
        f.pool_allocated);
    add(f.attached ? "gpumemprof's pool (other libraries): cached, free" : "gpumemprof's pool: cached, free",
        f.pool_cached);
    add("gpumemprof's own stream (the pool's fences)", f.own_streams);
    add(kAsyncBucket, f.async);
    add("VMM physical memory (cuMemCreate)", f.vmm_physical);
    for (int c = 0; c < kFootprintCauses; ++c)
        add(footprint_bucket(static_cast<FootprintCause>(c)), f.footprint[c]);
}

bool Profiler::unexplained_now(const DriverApi& api, int device, std::int64_t* out) noexcept {
    try {
        AccountingReading r;
        accounting_buckets(device, &r, true);
        if (!read_driver_used(api, device, &r)) // also false when the current context is another device's
            return false;
        *out = r.unexplained();
        return true;
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
        return false;
    }
}

void Profiler::footprint_begin(const DriverApi& api, FootprintWindow* w) noexcept {
    // Not before the device's baseline (which holds all the driver took until then), never
    // during a stream capture (no driver call of ours may join it), never in teardown.
    if (process_exiting() || streams_.captures.load(std::memory_order_acquire) > 0)
        return;
    CUdevice dev = 0;
    if (api.cuCtxGetDevice(&dev) != CUDA_SUCCESS || !accounting_.has_baseline(static_cast<int>(dev)))
        return;
    w->device = static_cast<int>(dev);
    w->active = unexplained_now(api, w->device, &w->unexplained);
}

std::int64_t Profiler::footprint_end(const DriverApi& api, FootprintCause cause, const FootprintWindow& w) noexcept {
    if (process_exiting() || streams_.captures.load(std::memory_order_acquire) > 0)
        return 0;
    // The current context may have changed inside the call (an unload that popped it, a created
    // context pushed, perhaps of another device): the reading must be of the window's device, or none.
    std::int64_t now = 0;
    if (!unexplained_now(api, w.device, &now))
        return 0;
    // Another thread's allocation in the window moved both the driver's figure and our
    // buckets: only what is still unexplained is the driver's own.
    const std::int64_t moved = now - w.unexplained;
    footprint_.add(w.device, cause, moved);
    if (moved != 0) {
        note_device_memory_acquired(w.device);
        account_if_acquired(api);
    }
    return moved;
}

void Profiler::context_created(const DriverApi& api, const FootprintWindow& w, CUcontext ctx) noexcept {
    const std::int64_t moved = footprint_end(api, FootprintCause::contexts, w);
    // Not remembered (the creation failed, or too many contexts live): not counted either, so
    // that no destroy is owed bytes it cannot give back.
    if (moved != 0 &&
        (ctx == nullptr || !footprint_.context_created(reinterpret_cast<std::uintptr_t>(ctx), w.device, moved)))
        footprint_.add(w.device, FootprintCause::contexts, -moved);
}

void Profiler::accounting_exit() noexcept {
    const DriverApi* api = driver(false);
    if (!api || process_exiting())
        return;
    CoreScope scope;
    try {
        CUcontext ctx = nullptr;
        if (api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS)
            return;
        for (const auto& [device, d] : accounting_.snapshot()) {
            // Each device's reading needs a context of that device current.
            CUcontext own = nullptr;
            pools_.for_each_live([&](PoolSlot* s) {
                if (s->device != device)
                    return false;
                own = s->ctx.load(std::memory_order_acquire);
                return own != nullptr;
            });
            const bool pushed = own && own != ctx && api->cuCtxPushCurrent_v2(own) == CUDA_SUCCESS;
            AccountingReading r;
            accounting_buckets(device, &r);
            if (read_driver_used(*api, device, &r)) {
                r.pool_sites = stacks::Recorder::instance().live_by_site(device);
                accounting_.set_exit(device, std::move(r));
            }
            if (pushed) {
                CUcontext popped = nullptr;
                api->cuCtxPopCurrent_v2(&popped);
            }
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

} // namespace gpumemprof::core

namespace gpumemprof::core {

void Profiler::capture_window_opened(const FootprintWindow& w) noexcept {
    std::lock_guard lock(capture_window_mutex_);
    if (!capture_window_.active)
        capture_window_ = w; // another thread's overlapping capture may have opened it already
}

void Profiler::capture_window_closed(const DriverApi& api) noexcept {
    FootprintWindow w;
    {
        std::lock_guard lock(capture_window_mutex_);
        if (!capture_window_.active || streams_.captures.load(std::memory_order_acquire) != 0)
            return;
        w = capture_window_;
        capture_window_ = {};
    }
    footprint_end(api, FootprintCause::captures, w);
}

} // namespace gpumemprof::core
