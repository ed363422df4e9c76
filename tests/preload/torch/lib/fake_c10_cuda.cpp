// SPDX-License-Identifier: MIT
// A stand-in for PyTorch's libc10_cuda.so with torch 2.11's allocator interface: the exported
// c10::cuda::CUDACachingAllocator::allocator object, whose vtable has getDeviceStats,
// attachAllocatorTraceTracker and name in torch 2.11's slots (9, 44, 49), and whose trace
// trackers get torch 2.11's TraceEntry. Behind it, PyTorch's caching policy: gpumemprof's own
// DevicePool (which replays PyTorch's allocator byte for byte), getting its segments with
// cudaMalloc through the CUDA runtime, as PyTorch does. Test programs drive it with the
// fake_torch_* functions.
#include "fake_torch.hpp"

#include "pool/alloc_conf.hpp"
#include "pool/device_pool.hpp"
#include "stats/device_stats.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {

using faketorch::MempoolId;
using faketorch::TraceEntry;
namespace pool = gpumemprof::pool;

/// A MemPool's own allocator (torch.cuda.MemPool(allocator=CUDAPluggableAllocator(...))).
struct PoolAllocator {
    void* (*alloc)(std::size_t) = nullptr;
    void (*release)(void*) = nullptr;
};

class RuntimeBackend final : public pool::Backend {
public:
    const MempoolId* current = nullptr;            ///< the pool of the request being served
    std::map<MempoolId, PoolAllocator> custom;     ///< pools with an allocator of the program's
    std::map<std::uintptr_t, PoolAllocator> owner; ///< segments one of those made

    int allocate(std::size_t size, std::uintptr_t* ptr) override {
        // As PyTorch's allocPrimitive: a pool's own allocator makes its segments.
        if (auto it = current ? custom.find(*current) : custom.end(); it != custom.end()) {
            *ptr = reinterpret_cast<std::uintptr_t>(it->second.alloc(size));
            if (*ptr == 0)
                return pool::kOutOfMemory;
            owner[*ptr] = it->second;
            return pool::kSuccess;
        }
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, size);
        *ptr = reinterpret_cast<std::uintptr_t>(p);
        return e == cudaSuccess ? pool::kSuccess : e == cudaErrorMemoryAllocation ? pool::kOutOfMemory : 999;
    }
    int release(std::uintptr_t ptr, std::size_t) override {
        if (auto it = owner.find(ptr); it != owner.end()) {
            it->second.release(reinterpret_cast<void*>(ptr));
            owner.erase(it);
            return pool::kSuccess;
        }
        return cudaFree(reinterpret_cast<void*>(ptr)) == cudaSuccess ? pool::kSuccess : 999;
    }
    int memory_info(std::size_t* free_bytes, std::size_t* total_bytes) override {
        return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess ? pool::kSuccess : 999;
    }
    pool::FenceId fence_record() override { return 0; }
    bool fence_done(pool::FenceId) override { return true; }
    bool fence_wait(pool::FenceId) override { return true; }
    bool fence_wait_for(pool::FenceId, std::uint64_t) override { return true; }
    void fence_release(pool::FenceId) override {}
};

// clang-format off
#define FILL(n) virtual void slot##n() {}

} // namespace

namespace faketorch {

// In a named namespace and built with -fno-devirtualize: calls through the vtable stay calls
// through the vtable, as PyTorch's through CUDAAllocator* are.
class FakeAllocator {
public:
    // torch 2.11's CUDAAllocator vtable, slot by slot (the unused ones are fillers).
    virtual ~FakeAllocator() = default;                                // slots 0 and 1
    FILL(2) FILL(3) FILL(4) FILL(5) FILL(6)
    virtual void emptyCache(MempoolId pool);                           // slot 7
    FILL(8)
    virtual faketorch::DeviceStats getDeviceStats(std::int8_t device); // slot 9
    virtual void resetAccumulatedStats(std::int8_t device);            // slot 10
    virtual void resetPeakStats(std::int8_t device);                   // slot 11
    FILL(12) FILL(13) FILL(14) FILL(15) FILL(16) FILL(17) FILL(18) FILL(19) FILL(20) FILL(21)
    FILL(22) FILL(23) FILL(24) FILL(25) FILL(26) FILL(27) FILL(28) FILL(29) FILL(30) FILL(31)
    FILL(32) FILL(33) FILL(34) FILL(35) FILL(36) FILL(37) FILL(38) FILL(39) FILL(40) FILL(41)
    FILL(42) FILL(43)
    virtual void attachAllocatorTraceTracker(std::function<void(const TraceEntry&)> tracker); // slot 44
    FILL(45) FILL(46) FILL(47) FILL(48)
    virtual std::string name();                                        // slot 49
    // clang-format on

    FakeAllocator() {
        const char* env = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
        pool::PoolOptions o;
        o.conf = pool::parse_alloc_conf(env ? env : "", nullptr);
        o.defer_frees = false; // PyTorch reuses a block on its stream at once
        pool_ = std::make_unique<pool::DevicePool>(backend_, o, &events_);
        backend_.current = &current_pool_;
    }

    void set_pool_allocator(MempoolId id, PoolAllocator a) {
        std::lock_guard lock(mutex_);
        backend_.custom[id] = a;
    }

    void* malloc(std::size_t size, std::uintptr_t stream, MempoolId id) {
        std::lock_guard lock(mutex_);
        current_pool_ = id;
        current_stream_ = stream;
        // A private pool's blocks are never handed out to other pools' requests.
        const std::uintptr_t key =
            stream ^ (static_cast<std::uintptr_t>(id.first) << 40) ^ (static_cast<std::uintptr_t>(id.second) << 48);
        std::uintptr_t p = 0;
        const int rc = pool_->malloc(size, key, &p);
        if (rc != pool::kSuccess)
            return nullptr;
        block_pool_[p] = {id, stream};
        return reinterpret_cast<void*>(p);
    }
    void free(void* ptr) {
        std::lock_guard lock(mutex_);
        auto it = block_pool_.find(reinterpret_cast<std::uintptr_t>(ptr));
        if (it == block_pool_.end())
            return;
        current_pool_ = it->second.first;
        current_stream_ = it->second.second;
        pool_->free(it->first);
        block_pool_.erase(it);
    }
    void empty_cache() {
        std::lock_guard lock(mutex_);
        pool_->empty_cache();
    }
    gpumemprof::stats::DeviceStats stats() const { return pool_->stats(); }

private:
    // The pool's events become PyTorch's record_trace calls, under its mutex. A member, not a
    // base: the allocator's own vtable must be PyTorch's.
    struct Events final : pool::PoolListener {
        FakeAllocator* a;
        explicit Events(FakeAllocator* owner) : a(owner) {}
        void on_alloc(std::uintptr_t p, std::size_t, std::size_t requested, std::uintptr_t,
                      pool::RequestSite) override {
            a->emit(TraceEntry::ALLOC, p, requested);
        }
        void on_free_requested(std::uintptr_t p, std::size_t, std::size_t requested) override {
            a->emit(TraceEntry::FREE_REQUESTED, p, requested);
        }
        void on_free_completed(std::uintptr_t p, std::size_t, std::size_t requested) override {
            a->emit(TraceEntry::FREE_COMPLETED, p, requested);
        }
        void on_segment_alloc(std::uintptr_t p, std::size_t s, pool::RequestSite) override {
            a->emit(TraceEntry::SEGMENT_ALLOC, p, s);
        }
        void on_segment_free(std::uintptr_t p, std::size_t s) override { a->emit(TraceEntry::SEGMENT_FREE, p, s); }
        void on_oom(const pool::OomInfo& i, pool::RequestSite) override {
            a->emit(TraceEntry::OOM, i.device_free, i.rounded);
        }
    };

    void emit(TraceEntry::Action a, std::size_t addr, std::size_t size) {
        TraceEntry e{a, 0, addr, nullptr, reinterpret_cast<void*>(current_stream_), size, current_pool_, 0, "", ""};
        for (const auto& t : trackers_)
            t(e);
    }

    std::recursive_mutex mutex_; // PyTorch's is recursive: a tracker may call back in
    RuntimeBackend backend_;
    Events events_{this};
    std::unique_ptr<pool::DevicePool> pool_;
    std::vector<std::function<void(const TraceEntry&)>> trackers_;
    std::map<std::uintptr_t, std::pair<MempoolId, std::uintptr_t>> block_pool_;
    MempoolId current_pool_{0, 0};
    std::uintptr_t current_stream_ = 0;
};

faketorch::DeviceStats FakeAllocator::getDeviceStats(std::int8_t) {
    std::lock_guard lock(mutex_);
    const gpumemprof::stats::DeviceStats s = pool_->stats();
    faketorch::DeviceStats o;
    auto copy = [](faketorch::Stat& d, const gpumemprof::stats::Stat& x) {
        d = {x.current, x.peak, x.allocated, x.freed};
    };
    for (int i = 0; i < 3; ++i) {
        copy(o.allocation[i], s.allocation[i]);
        copy(o.segment[i], s.segment[i]);
        copy(o.active[i], s.active[i]);
        copy(o.inactive_split[i], s.inactive_split[i]);
        copy(o.allocated_bytes[i], s.allocated_bytes[i]);
        copy(o.reserved_bytes[i], s.reserved_bytes[i]);
        copy(o.active_bytes[i], s.active_bytes[i]);
        copy(o.inactive_split_bytes[i], s.inactive_split_bytes[i]);
        copy(o.requested_bytes[i], s.requested_bytes[i]);
    }
    o.num_alloc_retries = s.num_alloc_retries;
    o.num_ooms = s.num_ooms;
    copy(o.oversize_allocations, s.oversize_allocations);
    copy(o.oversize_segments, s.oversize_segments);
    o.num_sync_all_streams = s.num_sync_all_streams;
    o.num_device_alloc = s.num_device_alloc;
    o.num_device_free = s.num_device_free;
    o.max_split_size = s.max_split_size;
    return o;
}

void FakeAllocator::emptyCache(MempoolId) {
    empty_cache();
}

void FakeAllocator::resetAccumulatedStats(std::int8_t) {
    std::lock_guard lock(mutex_);
    pool_->reset_accumulated_stats();
}

void FakeAllocator::resetPeakStats(std::int8_t) {
    std::lock_guard lock(mutex_);
    pool_->reset_peak_stats();
}

void FakeAllocator::attachAllocatorTraceTracker(std::function<void(const TraceEntry&)> tracker) {
    std::lock_guard lock(mutex_);
    trackers_.emplace_back(std::move(tracker));
}

std::string FakeAllocator::name() {
    const char* backend = std::getenv("FAKE_TORCH_BACKEND");
    return backend ? backend : "native";
}

} // namespace faketorch

namespace {
using faketorch::FakeAllocator;

FakeAllocator* the_allocator() {
    static FakeAllocator* a = new FakeAllocator();
    return a;
}

} // namespace

namespace c10::cuda::CUDACachingAllocator {
// The exported atomic pointer PyTorch's CUDACachingAllocator::get() loads.
__attribute__((visibility("default"))) std::atomic<void*> allocator{the_allocator()};
} // namespace c10::cuda::CUDACachingAllocator

extern "C" {

__attribute__((visibility("default"))) void* fake_torch_malloc(std::size_t size, std::uintptr_t stream,
                                                               unsigned long long pool_first,
                                                               unsigned long long pool_second) {
    return the_allocator()->malloc(size, stream, {pool_first, pool_second});
}

/// As at::cuda::getCUDABlasLtWorkspace() does: a library's workspace, named so by its function.
__attribute__((visibility("default"), noinline)) void* fake_getBlasLtWorkspace(std::size_t size) {
    void* p = the_allocator()->malloc(size, 0, {0, 0});
    asm volatile("" ::: "memory"); // not a tail call: this frame stays on the stack
    return p;
}

/// torch.cuda.MemPool(allocator=...): the pool's segments come from the program's functions.
__attribute__((visibility("default"))) void fake_torch_set_pool_allocator(unsigned long long pool_first,
                                                                          unsigned long long pool_second,
                                                                          void* (*alloc)(std::size_t),
                                                                          void (*release)(void*)) {
    the_allocator()->set_pool_allocator({pool_first, pool_second}, {alloc, release});
}

/// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: PyTorch's other allocator in this library,
/// stream-ordered memory straight from the driver's pool (the caching allocator is not used).
__attribute__((visibility("default"), noinline)) void* fake_torch_async_backend_malloc(std::size_t size) {
    void* p = nullptr;
    return cudaMallocAsync(&p, size, nullptr) == cudaSuccess ? p : nullptr;
}

__attribute__((visibility("default"), noinline)) void fake_torch_async_backend_free(void* p) {
    cudaFreeAsync(p, nullptr);
    cudaStreamSynchronize(nullptr);
}

__attribute__((visibility("default"))) void fake_torch_free(void* p) {
    the_allocator()->free(p);
}

// As torch.cuda.empty_cache() and torch.cuda.reset_*_memory_stats() do: through the vtable.
__attribute__((visibility("default"))) void fake_torch_empty_cache() {
    static_cast<FakeAllocator*>(c10::cuda::CUDACachingAllocator::allocator.load())->emptyCache({0, 0});
}

__attribute__((visibility("default"))) void fake_torch_reset_peak() {
    static_cast<FakeAllocator*>(c10::cuda::CUDACachingAllocator::allocator.load())->resetPeakStats(0);
}

__attribute__((visibility("default"))) void fake_torch_reset_accumulated() {
    static_cast<FakeAllocator*>(c10::cuda::CUDACachingAllocator::allocator.load())->resetAccumulatedStats(0);
}

/// torch.cuda.memory_stats() of the stand-in, as one JSON object (the 122 keys); the caller frees it.
__attribute__((visibility("default"))) char* fake_torch_stats_json() {
    return strdup(gpumemprof::stats::to_json(the_allocator()->stats()).c_str());
}

} // extern "C"
