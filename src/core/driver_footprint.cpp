// SPDX-License-Identifier: MIT
#include "core/driver_footprint.hpp"

#include <bit>
#include <cstdlib>
#include <cstring>

namespace gpumemprof::core {
namespace {

constexpr std::uintptr_t kEmpty = 0;
constexpr std::uintptr_t kBusy = std::uintptr_t{1} << 63; ///< a first use still being measured
constexpr int kProbes = 64;                               ///< slots looked at before the set counts as full for a key

/// Fibonacci hashing, as util::FlatMap's: the top bits of key x 2^64/phi, so that aligned
/// handles spread over the slots.
std::size_t slot_of(std::uintptr_t key) noexcept {
    constexpr int kBits = std::countr_zero(DriverFootprint::kSlots);
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9e3779b97f4a7c15ull) >> (64 - kBits));
}

} // namespace

const char* footprint_bucket(FootprintCause c) noexcept {
    switch (c) {
    case FootprintCause::code: return "the driver: modules and kernels loaded after the first allocation, local memory";
    case FootprintCause::graphs: return "the driver: CUDA graphs (executables, memory nodes)";
    case FootprintCause::limits: return "the driver: context limits (malloc heap, printf FIFO, stack)";
    case FootprintCause::captures:
        return "the driver: taken during stream captures (kernels first launched there, its bookkeeping)";
    case FootprintCause::streams: return "the driver: streams";
    case FootprintCause::contexts: return "the driver: contexts the program created";
    case FootprintCause::kCount: break;
    }
    return "the driver";
}

DriverFootprint::~DriverFootprint() {
    std::free(slots_.load(std::memory_order_acquire));
}

std::atomic<std::uintptr_t>* DriverFootprint::slots() noexcept {
    std::atomic<std::uintptr_t>* s = slots_.load(std::memory_order_acquire);
    if (s != nullptr) [[likely]]
        return s;
    // calloc: the pages are the kernel's zero pages until a key lands on them.
    auto* made = static_cast<std::atomic<std::uintptr_t>*>(std::calloc(kSlots, sizeof(std::atomic<std::uintptr_t>)));
    if (made == nullptr)
        return nullptr;
    if (slots_.compare_exchange_strong(s, made, std::memory_order_acq_rel, std::memory_order_acquire))
        return made;
    std::free(made); // another thread made it first
    return s;
}

HandleUse DriverFootprint::first_use(std::uintptr_t key) noexcept {
    std::atomic<std::uintptr_t>* s = slots();
    if (s == nullptr)
        return {};
    // The top bit marks a first use still being measured: keys are handles (user-space
    // addresses, below it) or hashes, which lose it (a collision only costs a measurement).
    std::uintptr_t k = key & ~kBusy;
    if (k == kEmpty)
        k = 1;
    std::size_t i = slot_of(k);
    for (int probe = 0; probe < kProbes; ++probe, i = (i + 1) & (kSlots - 1)) {
        std::uintptr_t cur = s[i].load(std::memory_order_acquire);
        if (cur == kEmpty) {
            if (s[i].compare_exchange_strong(cur, k | kBusy, std::memory_order_acq_rel, std::memory_order_acquire))
                return {true, &s[i], k};
            // another thread offered a key here first: this one, or another
        }
        if (cur == k)
            return {}; // its first use was measured
        if (cur == (k | kBusy))
            return {true, nullptr, k}; // its first use is being measured: this call may do the load
    }
    return {}; // full around this key: not measured
}

HandleUse DriverFootprint::first_use(std::uintptr_t handle, const char* name) noexcept {
    // FNV-1a over the name, mixed with the handle: collisions only cost a measurement.
    std::uint64_t h = 0xcbf29ce484222325ull;
    if (name != nullptr)
        for (const char* p = name; *p != '\0'; ++p)
            h = (h ^ static_cast<unsigned char>(*p)) * 0x100000001b3ull;
    return first_use((static_cast<std::uint64_t>(handle) * 0x9e3779b97f4a7c15ull) ^ h);
}

void DriverFootprint::first_use_done(const HandleUse& use) noexcept {
    if (use.entry == nullptr)
        return;
    // Not where forget_handles emptied the entry meanwhile (or another key took it since).
    std::uintptr_t busy = use.key | kBusy;
    use.entry->compare_exchange_strong(busy, use.key, std::memory_order_acq_rel, std::memory_order_relaxed);
}

void DriverFootprint::forget_handles() noexcept {
    if (std::atomic<std::uintptr_t>* s = slots_.load(std::memory_order_acquire))
        for (std::size_t i = 0; i < kSlots; ++i)
            if (s[i].load(std::memory_order_relaxed) != kEmpty)
                s[i].store(kEmpty, std::memory_order_relaxed);
}

void DriverFootprint::add(int device, FootprintCause cause, std::int64_t bytes) noexcept {
    measured_.fetch_add(1, std::memory_order_relaxed);
    if (device < 0 || device >= kMaxDevices || bytes == 0)
        return;
    bytes_[device][static_cast<int>(cause)].fetch_add(bytes, std::memory_order_relaxed);
}

std::int64_t DriverFootprint::bytes(int device, FootprintCause cause) const noexcept {
    if (device < 0 || device >= kMaxDevices)
        return 0;
    const std::int64_t b = bytes_[device][static_cast<int>(cause)].load(std::memory_order_relaxed);
    return b > 0 ? b : 0;
}

void DriverFootprint::clear_device(int device) noexcept {
    if (device < 0 || device >= kMaxDevices)
        return;
    for (auto& b : bytes_[device])
        b.store(0, std::memory_order_relaxed);
    for (CreatedContext& c : contexts_) {
        std::uintptr_t ctx = c.ctx.load(std::memory_order_acquire);
        if (ctx != 0 && c.device.load(std::memory_order_relaxed) == device)
            c.ctx.compare_exchange_strong(ctx, 0, std::memory_order_acq_rel); // its bytes left with the bucket
    }
}

bool DriverFootprint::context_created(std::uintptr_t ctx, int device, std::int64_t bytes) noexcept {
    if (ctx == 0)
        return false;
    for (CreatedContext& c : contexts_) {
        std::uintptr_t free = 0;
        if (c.ctx.load(std::memory_order_relaxed) == 0 &&
            c.ctx.compare_exchange_strong(free, ctx, std::memory_order_acq_rel)) {
            c.device.store(device, std::memory_order_relaxed);
            c.bytes.store(bytes, std::memory_order_release);
            return true;
        }
    }
    return false;
}

void DriverFootprint::context_destroyed(std::uintptr_t ctx) noexcept {
    if (ctx == 0)
        return;
    for (CreatedContext& c : contexts_) {
        std::uintptr_t mine = ctx;
        if (c.ctx.load(std::memory_order_acquire) != ctx)
            continue;
        const int device = c.device.load(std::memory_order_relaxed);
        const std::int64_t bytes = c.bytes.load(std::memory_order_acquire);
        // Given back, not measured: not one of measured_calls().
        if (c.ctx.compare_exchange_strong(mine, 0, std::memory_order_acq_rel) && device >= 0 && device < kMaxDevices)
            bytes_[device][static_cast<int>(FootprintCause::contexts)].fetch_sub(bytes, std::memory_order_relaxed);
        return;
    }
}

void DriverFootprint::clear() noexcept {
    forget_handles();
    for (int d = 0; d < kMaxDevices; ++d)
        clear_device(d);
}

} // namespace gpumemprof::core
