// SPDX-License-Identifier: MIT
// A cheap timestamp for timing the profiler's own hot path: the CPU's time-stamp counter on
// x86-64 (one instruction, no system call even where clock_gettime has no vDSO fast path), else
// the steady clock. Ticks are converted to nanoseconds at report time by comparing both clocks.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace gpumemprof::util {

class CycleClock {
public:
    static std::uint64_t now() noexcept {
#if defined(__x86_64__)
        return __rdtsc();
#else
        return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
    }

    /// Starts a calibration interval (call once, early).
    CycleClock() noexcept : ticks0_(now()), time0_(std::chrono::steady_clock::now()) {
    }

    /// Nanoseconds per tick, measured over the interval since construction; 0 until at least
    /// 1 ms has passed (too short to be meaningful).
    double ns_per_tick() const noexcept {
        const std::uint64_t ticks = now() - ticks0_;
        const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - time0_).count();
        if (ns < 1e6 || ticks == 0)
            return 0.0;
        return ns / static_cast<double>(ticks);
    }

private:
    std::uint64_t ticks0_;
    std::chrono::steady_clock::time_point time0_;
};

} // namespace gpumemprof::util
