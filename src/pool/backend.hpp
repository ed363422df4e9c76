// SPDX-License-Identifier: MIT
// The pool's only window onto a device: get and give back segments, ask for memory info,
// and fence freed memory. Two implementations: the real driver (src/core/driver_backend.*)
// and a simulated device (src/pool/sim_backend.*) used by unit tests and `gpumemprof replay`.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumemprof::pool {

/// Result codes are CUresult values so that the hooks can hand them back unchanged.
inline constexpr int kSuccess = 0;        // CUDA_SUCCESS
inline constexpr int kInvalidValue = 1;   // CUDA_ERROR_INVALID_VALUE
inline constexpr int kOutOfMemory = 2;    // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr int kNotSupported = 801; // CUDA_ERROR_NOT_SUPPORTED

/// One page of physical memory (cuMemCreate's CUmemGenericAllocationHandle). 0 is no page.
using PageHandle = std::uint64_t;

/// A fence marks "every piece of device work queued so far, on every stream". 0 is no fence.
/// Fences finish in the order they were recorded: once one is done, every earlier one is.
using FenceId = std::uint64_t;

class Backend {
public:
    virtual ~Backend() = default;

    /// Obtain `size` bytes of device memory (one segment). Returns kSuccess and sets *ptr, or the
    /// driver's error code (kOutOfMemory when the device is full).
    virtual int allocate(std::size_t size, std::uintptr_t* ptr) = 0;
    /// Give a whole segment back. Returns the driver's code.
    virtual int release(std::uintptr_t ptr, std::size_t size) = 0;
    /// Device-wide free and total bytes as the driver reports them.
    virtual int memory_info(std::size_t* free_bytes, std::size_t* total_bytes) = 0;

    /// Record a fence covering all work queued so far. Returns 0 when no fence can be recorded
    /// now (a stream capture is active, or the process is tearing down).
    virtual FenceId fence_record() = 0;
    /// True once all work before the fence has finished. Never blocks.
    virtual bool fence_done(FenceId fence) = 0;
    /// Block until the fence is done. Returns false if waiting is not allowed now (capture).
    virtual bool fence_wait(FenceId fence) = 0;
    /// Block until the fence is done or `limit_ns` passed. True when it is done; false on the
    /// time limit or when waiting is not allowed now. The pool's bounded wait on a miss.
    virtual bool fence_wait_for(FenceId fence, std::uint64_t limit_ns) = 0;
    /// The fence is no longer needed.
    virtual void fence_release(FenceId fence) = 0;
    /// Block until all work queued so far on the device has finished, without a fence: the last
    /// resort when no fence can be recorded (the driver refuses events). Returns false if that is
    /// not possible or not allowed now (capture, teardown).
    virtual bool synchronize() { return false; }

    /// True while every piece of device work the program can queue runs in one order (one
    /// context, only its legacy default stream): a block the program frees may then be handed out
    /// again at once, as PyTorch does within a stream, because whatever the program queues next
    /// runs after the work queued before the free. False (the default): freed blocks wait for a
    /// fence. Once false it stays false.
    virtual bool frees_ordered() { return false; }

    // ---- virtual memory (expandable segments); the driver's cuMem* calls one for one -------------
    // A backend without virtual memory management answers kNotSupported.

    /// cuMemGetAllocationGranularity (minimum) for device memory: page sizes are multiples of it.
    virtual int vmm_granularity(std::size_t* bytes) { return kNotSupported; }
    /// cuMemAddressReserve: `size` bytes of address space, no memory behind them.
    virtual int address_reserve(std::size_t size, std::uintptr_t* va) { return kNotSupported; }
    /// cuMemAddressFree of a whole reservation (nothing may be mapped in it any more).
    virtual int address_free(std::uintptr_t va, std::size_t size) { return kNotSupported; }
    /// cuMemCreate: one page of `size` bytes of device memory (kOutOfMemory when the device is full).
    virtual int page_create(std::size_t size, PageHandle* page) { return kNotSupported; }
    /// cuMemRelease.
    virtual int page_release(PageHandle page) { return kNotSupported; }
    /// cuMemMap of a whole page at `va` (inside a reservation).
    virtual int page_map(std::uintptr_t va, std::size_t size, PageHandle page) { return kNotSupported; }
    /// cuMemUnmap of [va, va + size).
    virtual int page_unmap(std::uintptr_t va, std::size_t size) { return kNotSupported; }
    /// cuMemSetAccess: the device may read and write [va, va + size) (every page of it is mapped).
    virtual int set_access(std::uintptr_t va, std::size_t size) { return kNotSupported; }
};

} // namespace gpumemprof::pool
