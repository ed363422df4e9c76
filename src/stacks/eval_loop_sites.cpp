// SPDX-License-Identifier: MIT
#include "stacks/eval_loop_sites.hpp"

#include "stacks/backtrace.hpp"
#include "stacks/python_frames.hpp"

#include <atomic>
#include <cstddef>

namespace gpumemprof::stacks::eval_loop {

namespace {

/// The learnt addresses: an open-addressed set that only grows, lock-free (a slot goes from 0
/// to its address once). The eval loop has a few dozen call sites that reach C code; a full set
/// learns nothing more, and the report then falls back on the loop's name.
constexpr std::size_t kSlots = 1024;
std::atomic<std::uintptr_t> g_slots[kSlots];
std::atomic<int> g_count{0};

std::size_t home(std::uintptr_t ip) noexcept {
    return static_cast<std::size_t>((ip * 0x9e3779b97f4a7c15ull) >> 54) & (kSlots - 1);
}

void insert(std::uintptr_t ip) noexcept {
    if (ip == 0)
        return;
    for (std::size_t i = home(ip), probes = 0; probes < kSlots; i = (i + 1) & (kSlots - 1), ++probes) {
        std::uintptr_t seen = g_slots[i].load(std::memory_order_acquire);
        if (seen == ip)
            return;
        if (seen == 0) {
            if (g_slots[i].compare_exchange_strong(seen, ip, std::memory_order_acq_rel)) {
                g_count.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            if (seen == ip)
                return;
        }
    }
}

} // namespace

void learn(const std::uintptr_t* ips, int n, int skip, std::uint64_t serial) noexcept {
    if (ips == nullptr || n <= 0)
        return;
    std::uintptr_t shims[64];
    const int shim_count = python::shim_addresses(shims, 64);
    if (shim_count == 0)
        return;
    std::uintptr_t sps[kMaxFrames];
    const int frames = latest_walk_sps(sps, n < kMaxFrames ? n : kMaxFrames, skip, serial);
    // Both lists run outward, toward higher addresses: frame i spans [sps[i], sps[i + 1]).
    int i = 0;
    for (int s = 0; s < shim_count; ++s) {
        const std::uintptr_t at = shims[s];
        while (i + 1 < frames && sps[i + 1] <= at)
            ++i;
        if (i + 1 < frames && sps[i] <= at)
            insert(ips[i]);
    }
}

bool is_site(std::uintptr_t ip) noexcept {
    if (ip == 0 || g_count.load(std::memory_order_relaxed) == 0)
        return false;
    for (std::size_t i = home(ip), probes = 0; probes < kSlots; i = (i + 1) & (kSlots - 1), ++probes) {
        const std::uintptr_t seen = g_slots[i].load(std::memory_order_acquire);
        if (seen == ip)
            return true;
        if (seen == 0)
            return false;
    }
    return false;
}

} // namespace gpumemprof::stacks::eval_loop
