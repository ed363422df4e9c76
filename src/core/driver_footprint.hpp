// SPDX-License-Identifier: MIT
// What the driver takes for itself inside calls that allocate nothing: the code of modules, the
// kernels it loads lazily at their first use (CUDA_MODULE_LOADING=LAZY, the default) and the local
// memory it grows for them, CUDA graph executables, and the context limits (malloc heap, printf
// FIFO, stack). No allocation call names these bytes; the device accounting would show them as
// "unexplained". Each such call is measured instead: the driver's used figure across the call,
// less what our own accounting moved in the same window (another thread's allocation), goes to
// the call's cause. Launches and function lookups are measured the first time each handle is
// seen (a lock-free set), and so is any call of the handle while that first one is still being
// measured; the rest at every call (they are rare). See docs/design.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpumemprof::core {

enum class FootprintCause : int {
    /// cuModuleLoad*, cuLibraryLoad* and their unloads, and a kernel's first lookup or launch:
    /// code and globals loaded (lazily, the default), local memory grown for a kernel. One cause,
    /// so that an unload gives back what the lookups of its kernels took.
    code,
    /// cuGraphInstantiate*, the first upload or launch of an executable (with the memory its
    /// memory nodes map), its destroy, cuDeviceGraphMemTrim (which gives that memory back)
    graphs,
    limits, ///< cuCtxSetLimit (malloc heap, printf FIFO, stack size)
    /// From the first of overlapping stream captures' begin to the last one's end: what the
    /// driver took in them (kernels first launched there, its own bookkeeping), measured around
    /// them, since no driver call of ours may run inside a capture.
    captures,
    streams, ///< cuStreamCreate*, cuStreamDestroy: a stream's queue (2 MiB and more on an H200)
    /// cuCtxCreate*: a context the program created (hundreds of MiB on an H100), given back at its
    /// cuCtxDestroy (what it loaded afterwards stays in the other causes).
    contexts,
    kCount
};
inline constexpr int kFootprintCauses = static_cast<int>(FootprintCause::kCount);

/// The name of a cause's bucket in the accounting (JSON, .txt, HTML).
const char* footprint_bucket(FootprintCause c) noexcept;

/// What DriverFootprint::first_use answers for one call of a handle.
struct HandleUse {
    /// Measure this call: the handle's first use, or a call made while the first one is still
    /// being measured (the driver may load the kernel in that call instead of the first).
    bool measure = false;
    /// The first use's entry (null for any other call): first_use_done ends it.
    std::atomic<std::uintptr_t>* entry = nullptr;
    std::uintptr_t key = 0;
    bool first() const noexcept { return entry != nullptr; }
};

class DriverFootprint {
public:
    DriverFootprint() noexcept = default;
    ~DriverFootprint();
    DriverFootprint(const DriverFootprint&) = delete;
    DriverFootprint& operator=(const DriverFootprint&) = delete;

    /// The first time `key` is offered: its first use, measured; until first_use_done(that use),
    /// every other offer of it is measured too; afterwards none is, and none once the set is full
    /// (then the bytes stay unexplained). Lock-free; a few loads on a handle already seen.
    HandleUse first_use(std::uintptr_t key) noexcept;
    /// The same for a handle and a name (cuModuleGetFunction, cuLibraryGetKernel).
    HandleUse first_use(std::uintptr_t handle, const char* name) noexcept;
    /// The first use's call returned and its measurement ended (call it whether or not the call
    /// could be measured): later offers of its key are not measured. Nothing for other uses.
    void first_use_done(const HandleUse& use) noexcept;
    /// Every handle is new again (its context went: the driver loads its kernels anew).
    void forget_handles() noexcept;

    /// A measured call of `cause` on `device` moved the unexplained part by `bytes` (either way).
    void add(int device, FootprintCause cause, std::int64_t bytes) noexcept;
    /// What `cause` holds on `device` now (never below 0).
    std::int64_t bytes(int device, FootprintCause cause) const noexcept;
    /// The device's context went, and the driver's own memory with it.
    void clear_device(int device) noexcept;
    /// Every device and every handle (a fork child starts with nothing of its parent's).
    void clear() noexcept;
    /// Whether one more stream creation or destruction is measured: the first kMaxStreamCalls
    /// are (a program that makes a stream per task pays no more after them).
    bool stream_call_measured() noexcept {
        return stream_calls_.fetch_add(1, std::memory_order_relaxed) < kMaxStreamCalls;
    }
    /// A created context took `bytes` (already added to the contexts bucket): remembered, so that
    /// its destroy gives them back. False when kMaxContexts are remembered already.
    bool context_created(std::uintptr_t ctx, int device, std::int64_t bytes) noexcept;
    /// The context was destroyed: what context_created remembered for it leaves the bucket.
    void context_destroyed(std::uintptr_t ctx) noexcept;
    /// Calls measured so far (for the reports' accounting note).
    std::int64_t measured_calls() const noexcept { return measured_.load(std::memory_order_relaxed); }

    static constexpr int kMaxDevices = 64;
    static constexpr std::size_t kSlots = std::size_t{1} << 15;
    static constexpr std::int64_t kMaxStreamCalls = 4096;
    static constexpr int kMaxContexts = 256;

private:
    std::atomic<std::uintptr_t>* slots() noexcept;

    std::atomic<std::atomic<std::uintptr_t>*> slots_{nullptr}; ///< kSlots keys, made at first use
    std::atomic<std::int64_t> bytes_[kMaxDevices][kFootprintCauses] = {};
    std::atomic<std::int64_t> measured_{0};
    std::atomic<std::int64_t> stream_calls_{0};
    /// A created context's measured bytes. Lock-free (no lock of ours is held across fork): an
    /// entry is claimed by its handle, and a handle is destroyed only after its creation returned.
    struct CreatedContext {
        std::atomic<std::uintptr_t> ctx{0}; ///< 0: a free entry
        std::atomic<int> device{0};
        std::atomic<std::int64_t> bytes{0};
    };
    CreatedContext contexts_[kMaxContexts];
};

} // namespace gpumemprof::core
