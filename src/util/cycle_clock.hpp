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

    /// Where a thread last read both clocks, for steady_at().
    struct Anchor {
        std::uint64_t ticks = 0;
        std::chrono::steady_clock::time_point time;
        double ns_per_tick = 0.0;
    };
    /// The steady clock's reading at `ticks` (an earlier now()): `anchor`'s time plus the
    /// ticks between, at the rate measured so far. Both clocks are read again (the anchor
    /// moves to now) when `ticks` is more than 100 ms from it; a reading older than that
    /// is then taken back from now. Until the rate is known (the first millisecond), the
    /// steady clock now: off by at most the reading's age.
    std::chrono::steady_clock::time_point steady_at(std::uint64_t ticks, Anchor& anchor) const noexcept {
        const auto since = [&ticks](const Anchor& a) {
            const double ns = static_cast<double>(static_cast<std::int64_t>(ticks - a.ticks)) * a.ns_per_tick;
            return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
        };
        if (anchor.ns_per_tick > 0.0) {
            const auto ns = since(anchor);
            if (ns > -kAnchorReach && ns < kAnchorReach)
                return anchor.time + ns;
        }
        const double rate = ns_per_tick();
        const std::uint64_t now_ticks = now();
        const auto now_time = std::chrono::steady_clock::now();
        if (rate <= 0.0)
            return now_time;
        anchor = {now_ticks, now_time, rate};
        return anchor.time + since(anchor);
    }

private:
    static constexpr std::chrono::nanoseconds kAnchorReach{100'000'000};
    std::uint64_t ticks0_;
    std::chrono::steady_clock::time_point time0_;
};

} // namespace gpumemprof::util
