// SPDX-License-Identifier: MIT
// Accounting of the device memory that is NOT served by the pool but passes through to the
// driver unchanged: stream-ordered (async) allocations, managed memory, VMM physical handles and
// mappings, pinned host memory. Each kind has calls/frees/current/peak/total per device; the
// call sites and the trace hear of each allocation through the ledger.
#pragma once

#include "core/driver_api.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpumemprof::stacks {
class Recorder;
}
namespace gpumemprof::trace {
class Writer;
}

namespace gpumemprof::core {

class TorchAttach;

/// Device keys besides device ordinals.
inline constexpr int kHostMemory = -1;             ///< the ledger's key for pinned host memory
inline constexpr int kDeviceOfCurrentContext = -2; ///< record_alloc: the calling thread's device

/// torch_segment / torch_physical / torch_async / torch_managed: device memory PyTorch's own
/// caching allocator took from the driver (a cudaMalloc'd segment, a cuMemCreate'd page; a MemPool
/// allocator of the program's may take stream-ordered or managed memory): counted as that
/// allocator's reserved memory, never as pass-through memory of the program.
enum class Kind : int {
    async = 0,
    managed,
    vmm_physical,
    vmm_mapped,
    host_pinned,
    torch_segment,
    torch_physical,
    torch_async,
    torch_managed,
    count
};

struct KindCounters {
    std::int64_t calls = 0;
    std::int64_t frees = 0;
    std::int64_t current_bytes = 0;
    std::int64_t peak_bytes = 0;
    std::int64_t total_bytes = 0;
};

struct DeviceLedger {
    std::array<KindCounters, static_cast<int>(Kind::count)> kinds{};
    std::int64_t device_allocs = 0; ///< VMM maps: they count in num_device_alloc, as in PyTorch
    std::int64_t device_frees = 0;  ///< VMM unmaps: num_device_free
};

/// Kinds whose memory the driver frees with the context it was allocated in (cuCtxDestroy,
/// cudaDeviceReset): stream-ordered, managed, and PyTorch's segments of those and of cudaMalloc.
inline constexpr Kind kContextBound[] = {Kind::async, Kind::managed, Kind::torch_segment, Kind::torch_async,
                                         Kind::torch_managed};
/// PyTorch's segments an address names (freed with cuMemFree or cuMemFreeAsync).
inline constexpr bool torch_address_kind(Kind k) {
    return k == Kind::torch_segment || k == Kind::torch_async || k == Kind::torch_managed;
}

/// Who else hears of the ledger's allocations: the call sites, and the trace (VMM mappings).
/// Null members are left out (a unit test's ledger has none).
struct PassthroughConsumers {
    stacks::Recorder* recorder = nullptr;
    const std::atomic<trace::Writer*>* trace = nullptr;
    /// Attached to PyTorch's allocator, its segments are not charged to call stacks (its blocks
    /// are, one by one).
    const TorchAttach* torch = nullptr;
};

class PassthroughLedger {
public:
    explicit PassthroughLedger(PassthroughConsumers consumers = {}) : consumers_(consumers) {}

    // ---- the accounting the hooks ask for ------------------------------------------------------
    /// The driver made an allocation of `kind` (address or VMM handle `key`) for the program:
    /// `device` an ordinal, kHostMemory, or kDeviceOfCurrentContext (asked of the driver); the
    /// context-bound kinds note the current context. Charged to `stack`. Returns the device.
    int record(Kind kind, const DriverApi& api, std::uintptr_t key, std::size_t bytes, int device,
               std::uint32_t stack) noexcept;
    /// The program freed or unmapped `key` of `kind` through the driver, which succeeded.
    void release(Kind kind, std::uintptr_t key) noexcept;
    /// cuMemFree/cuMemFreeAsync of `ptr` succeeded in the driver: managed, stream-ordered or a
    /// PyTorch segment.
    void freed_by_driver(std::uintptr_t ptr) noexcept;
    /// Context `ctx` goes: what the driver frees with it leaves the ledger and the call sites.
    void context_gone(CUcontext ctx) noexcept;
    /// Whether memory of `kind` is charged to call stacks as it is allocated.
    bool in_recorder(Kind kind) const noexcept;

    // ---- the ledger itself -------------------------------------------------------------------
    /// An allocation the driver freed with its context (drop_context).
    struct Dropped {
        std::uintptr_t key;
        Kind kind;
        int device;
    };

    /// Record a new allocation or mapping keyed by `key` (address or VMM handle), made in context
    /// `ctx` (0: none known). A live entry at the same key can only be one whose free we missed
    /// (the driver never hands out live memory twice): it counts as freed first.
    void add(Kind kind, int device, std::uintptr_t key, std::size_t bytes, std::uintptr_t ctx = 0);
    /// Remove it. Returns true and sets *kind/*device if the key was known for one of `kinds`.
    bool remove(std::uintptr_t key, std::initializer_list<Kind> kinds, Kind* kind = nullptr, int* device = nullptr,
                std::size_t* bytes = nullptr);
    /// Device of a VMM physical handle, -1 if unknown or host-located.
    int handle_device(std::uintptr_t handle) const;
    /// The context `ctx` is gone: every allocation of the kContextBound kinds made in it went
    /// with it. They are counted as freed and returned (appended to *out).
    void drop_context(std::uintptr_t ctx, std::vector<Dropped>* out);

    std::map<int, DeviceLedger> snapshot() const; ///< device -1 holds host memory
    /// The bytes of `kinds`, together, live on `device` now (one reading under one lock).
    std::int64_t current_bytes(int device, std::initializer_list<Kind> kinds) const;
    /// Every kind's bytes live on `device` now, by Kind (one reading under one lock).
    std::array<std::int64_t, static_cast<int>(Kind::count)> current_by_kind(int device) const;
    void clear();
    void lock_for_fork() { mutex_.lock(); }
    void unlock_after_fork() { mutex_.unlock(); }

private:
    struct Entry {
        Kind kind;
        int device;
        std::size_t bytes;
        std::uintptr_t ctx;
    };
    static std::uint64_t slot(Kind kind, std::uintptr_t key);
    void count_free(const Entry& e); // requires mutex_
    PassthroughConsumers consumers_;
    mutable std::mutex mutex_;
    std::unordered_map<std::uint64_t, Entry> live_; // (kind-tagged key) -> entry
    std::map<int, DeviceLedger> devices_;
};

} // namespace gpumemprof::core
