// SPDX-License-Identifier: MIT
// Which loaded module called the CUDA entry point we are in: the return address of the program's
// call (the runtime door passes it on to the driver hooks it leads to), named by a small id.
// PyTorch's allocator (libc10_cuda.so) is told apart this way, and the device accounting names
// the library that owns each pass-through allocation (cuBLAS, NCCL, ...).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace gpumemprof::core {

/// The return address of the call that entered the CUDA runtime (set by the runtime door for
/// the duration of its call), else `own`: the return address of the driver hook itself.
std::uintptr_t entry_caller(std::uintptr_t own) noexcept;

/// Sets entry_caller for this thread while alive (the runtime door: cudaMalloc reaches the
/// driver hooks through libcudart, whose frames say nothing of who asked).
class EntryCallerScope {
public:
    explicit EntryCallerScope(const void* return_address) noexcept;
    ~EntryCallerScope();
    EntryCallerScope(const EntryCallerScope&) = delete;
    EntryCallerScope& operator=(const EntryCallerScope&) = delete;

private:
    std::uintptr_t saved_;
};

class CallerModules {
public:
    static constexpr std::uint16_t kUnknown = 0; ///< no module (JIT code) or not looked up
    static constexpr int kMaxModules = 1024;

    static CallerModules& instance() noexcept;

    /// The id of the module holding `addr` (dladdr on the first sight of an address, then a
    /// lock-free cache). Takes the loader's lock on a miss: never from a signal handler.
    std::uint16_t module_of(std::uintptr_t addr) noexcept;
    /// The module's file path ("" for kUnknown).
    std::string path(std::uint16_t id) const;
    /// Its file name without directories or version suffixes: "libcublas", "libnccl", "python3.12".
    std::string library(std::uint16_t id) const;
    /// libc10_cuda.so: PyTorch's CUDA caching allocator.
    bool is_torch_allocator(std::uint16_t id) const noexcept;
    /// libc10_cuda.so's id when one of the calling thread's nearer frames is in it, else kUnknown:
    /// a program's own allocator that PyTorch's called (a MemPool's CUDAPluggableAllocator),
    /// whose calls come from the program's library. Walks the stack only while libc10_cuda.so is
    /// loaded (the loader's list is looked at again every few milliseconds until it is). With
    /// `direct`, also whether every nearer frame is CUDA's runtime, its driver or ours: then
    /// PyTorch's allocator made the call itself, through the shared runtime (its
    /// `backend:cudaMallocAsync`), and no program's allocator stands between.
    std::uint16_t torch_allocator_in_stack(bool* direct = nullptr) noexcept;

private:
    CallerModules() = default;
    /// libcudart, libcuda or our own library (looked up by name once per module).
    bool cuda_or_ours(std::uint16_t id) noexcept;
    std::uint16_t add(const char* path, const void* base) noexcept; // requires mutex_
    bool torch_allocator_loaded() noexcept;

    static constexpr int kCacheSize = 1024;
    std::atomic<std::uint64_t> cache_[kCacheSize] = {}; ///< (address << 16) | id
    mutable std::mutex mutex_;
    const void* bases_[kMaxModules] = {};
    const char* paths_[kMaxModules] = {}; ///< leaked copies: read without the lock once published
    std::atomic<int> count_{1};           ///< id 0 is kUnknown
    std::atomic<int> torch_allocator_{-1};
    std::atomic<std::uint8_t> cuda_or_ours_[kMaxModules] = {}; ///< 0: not looked up, 1: yes, 2: no
    std::atomic<bool> torch_loaded_{false};                    ///< libc10_cuda.so seen in the loader's list
    std::atomic<std::uintptr_t> torch_range_lo_{0};            ///< its mapped range (published by torch_loaded_)
    std::atomic<std::uintptr_t> torch_range_hi_{0};
    std::atomic<std::uint64_t> torch_looked_at_{0};  ///< the time-stamp counter at the last look
    std::atomic<unsigned long long> looked_adds_{0}; ///< the loader's count of loads then
};

} // namespace gpumemprof::core
