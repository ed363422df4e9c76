// SPDX-License-Identifier: MIT
// Accounting of the device memory that is NOT served by the pool but passes through to the
// driver unchanged: stream-ordered (async) allocations, managed memory, VMM physical handles and
// mappings, pinned host memory. Each kind has calls/frees/current/peak/total per device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpumemprof::core {

/// Device keys besides device ordinals.
inline constexpr int kHostMemory = -1;             ///< the ledger's key for pinned host memory
inline constexpr int kDeviceOfCurrentContext = -2; ///< record_alloc: the calling thread's device

/// torch_segment / torch_physical: device memory PyTorch's own caching allocator took from the
/// driver (a cudaMalloc'd segment, a cuMemCreate'd page): counted as that allocator's reserved
/// memory, never as pass-through memory of the program.
enum class Kind : int {
    async = 0,
    managed,
    vmm_physical,
    vmm_mapped,
    host_pinned,
    torch_segment,
    torch_physical,
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
/// cudaDeviceReset): stream-ordered, managed, and PyTorch's cudaMalloc'd segments.
inline constexpr Kind kContextBound[] = {Kind::async, Kind::managed, Kind::torch_segment};

class PassthroughLedger {
public:
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
    mutable std::mutex mutex_;
    std::unordered_map<std::uint64_t, Entry> live_; // (kind-tagged key) -> entry
    std::map<int, DeviceLedger> devices_;
};

} // namespace gpumemprof::core
