// SPDX-License-Identifier: MIT
// Benchmark: the error of sampling (Recorder::set_sampling) against full capture, on the same
// allocations in the same run. 240 call sites (real distinct stacks: one function each) allocate
// a training-loop-like mix for 60 steps: most allocations are small (512 B to 512 KiB, as in
// recorded PyTorch steps), most bytes are in large ones (1 to 256 MiB); each step frees what was
// allocated two steps before, and a few sites keep what they allocated (weights, caches). Two
// recorders see every allocation: one captures all, one samples (every allocation >= 1 MiB plus
// 1 in N smaller ones, bytes scaled by N). Printed per N: the share of allocations unwound, and
// for each site's total bytes and bytes live at the peak, the relative error (median and worst
// over sites holding >= 0.5% of the bytes, and over the small-allocation sites alone), and the
// total variation distance between the two distributions over sites.
#include "stacks/recorder.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <utility>
#include <vector>

using gpumemprof::stacks::Recorder;
using gpumemprof::stacks::StackId;

namespace {

constexpr int kSites = 240;
constexpr int kSteps = 60;

struct Both {
    Recorder* full;
    Recorder* sampled;
    std::uintptr_t next_ptr = 0x10000000;
};

/// Both recorders see the allocation (their innermost frames are the two calls here).
__attribute__((noinline)) void allocate(Both& b, std::size_t bytes, std::vector<std::uintptr_t>& out) {
    const std::uintptr_t p = b.next_ptr;
    b.next_ptr += (bytes + 511) & ~std::size_t{511};
    const StackId a = b.full->capture(bytes);
    b.full->on_alloc(0, p, bytes, bytes, a);
    const StackId s = b.sampled->capture(bytes);
    b.sampled->on_alloc(0, p, bytes, bytes, s);
    out.push_back(p);
}

/// One call site: a stack of its own (the template instance's return address).
template <int I>
__attribute__((noinline, noipa)) void site(Both& b, std::size_t bytes, std::vector<std::uintptr_t>& out) {
    allocate(b, bytes, out);
    asm volatile("" ::"r"(I) : "memory"); // distinct bodies: identical ones would be folded into one
}

using SiteFn = void (*)(Both&, std::size_t, std::vector<std::uintptr_t>&);
template <int... I> constexpr std::array<SiteFn, sizeof...(I)> make_sites(std::integer_sequence<int, I...>) {
    return {&site<I>...};
}
constexpr auto kSiteFns = make_sites(std::make_integer_sequence<int, kSites>{});

struct SitePlan {
    double median = 0; ///< bytes
    int per_step = 1;
    bool keeps = false; ///< never frees
};

struct Errors {
    double median = 0, worst = 0;
};

Errors relative_errors(const std::vector<std::pair<double, double>>& truth_est) {
    std::vector<double> e;
    for (const auto& [t, s] : truth_est)
        e.push_back(std::abs(s - t) / t);
    Errors r;
    if (e.empty())
        return r;
    std::sort(e.begin(), e.end());
    r.median = e[e.size() / 2];
    r.worst = e.back();
    return r;
}

void run(std::uint32_t one_in, const std::vector<SitePlan>& plan, std::uint32_t seed) {
    Recorder full, sampled;
    full.configure(64);
    sampled.configure(64);
    sampled.set_sampling(std::size_t{1} << 20, one_in);
    Both b{&full, &sampled};
    std::mt19937_64 rng(seed);
    std::vector<std::vector<std::uintptr_t>> step_blocks(kSteps);
    std::uint64_t allocations = 0;
    for (int step = 0; step < kSteps; ++step) {
        for (int i = 0; i < kSites; ++i) {
            std::lognormal_distribution<double> size(std::log(plan[i].median), 0.35);
            for (int k = 0; k < plan[i].per_step; ++k) {
                const auto bytes = static_cast<std::size_t>(std::max(64.0, size(rng)));
                std::vector<std::uintptr_t> sink;
                kSiteFns[static_cast<std::size_t>(i)](b, bytes, plan[i].keeps ? sink : step_blocks[step]);
                ++allocations;
            }
        }
        if (step >= 2) {
            for (std::uintptr_t p : step_blocks[step - 2]) {
                full.on_free(0, p);
                sampled.on_free(0, p);
            }
            step_blocks[step - 2].clear();
        }
    }
    const auto df = full.collect();
    const auto ds = sampled.collect();
    // Sites are matched by their frames above the innermost one (the two recorders number stacks
    // independently, and capture from two calls in site<I>).
    auto outer = [](const std::vector<std::uintptr_t>& f) {
        return f.size() > 1 ? std::vector<std::uintptr_t>(f.begin() + 1, f.end()) : std::vector<std::uintptr_t>();
    };
    std::map<std::vector<std::uintptr_t>, const gpumemprof::stacks::SiteData*> sampled_by_frames;
    for (const auto& s : ds.sites)
        sampled_by_frames[outer(s.frames)] = &s;
    double total_true = 0, peak_true = 0;
    for (const auto& s : df.sites) {
        total_true += static_cast<double>(s.counters.total_bytes);
        peak_true += static_cast<double>(s.counters.peak_live_bytes);
    }
    std::vector<std::pair<double, double>> total_big, total_small, peak_big, peak_small;
    double tv_total = 0, tv_peak = 0, total_est = 0, peak_est = 0;
    for (const auto& s : ds.sites) {
        total_est += static_cast<double>(s.counters.total_bytes);
        peak_est += static_cast<double>(s.counters.peak_live_bytes);
    }
    for (const auto& s : df.sites) {
        if (s.frames.empty())
            continue;
        const auto it = sampled_by_frames.find(outer(s.frames));
        const double t_total = static_cast<double>(s.counters.total_bytes);
        const double t_peak = static_cast<double>(s.counters.peak_live_bytes);
        const double e_total =
            it == sampled_by_frames.end() ? 0 : static_cast<double>(it->second->counters.total_bytes);
        const double e_peak =
            it == sampled_by_frames.end() ? 0 : static_cast<double>(it->second->counters.peak_live_bytes);
        tv_total += std::abs(t_total / total_true - e_total / total_est);
        tv_peak += std::abs(t_peak / peak_true - (peak_est > 0 ? e_peak / peak_est : 0));
        const bool small = static_cast<double>(s.counters.total_bytes) / static_cast<double>(s.counters.total_count) <
                           static_cast<double>(1 << 20);
        if (t_total >= 0.005 * total_true)
            total_big.emplace_back(t_total, e_total);
        if (t_peak >= 0.005 * peak_true)
            peak_big.emplace_back(t_peak, e_peak);
        if (small) {
            total_small.emplace_back(t_total, e_total);
            if (t_peak > 0)
                peak_small.emplace_back(t_peak, e_peak);
        }
    }
    const auto cs = sampled.capture_stats();
    const auto cf = full.capture_stats();
    const Errors tb = relative_errors(total_big), ts = relative_errors(total_small);
    const Errors pb = relative_errors(peak_big), ps = relative_errors(peak_small);
    std::printf("1 in %-4u unwound %5.1f%% of %llu allocations (full: %.1f%%); peak %s\n", one_in,
                100.0 * static_cast<double>(cs.captures) / static_cast<double>(allocations),
                static_cast<unsigned long long>(allocations),
                100.0 * static_cast<double>(cf.captures) / static_cast<double>(allocations),
                ds.peak_bytes == df.peak_bytes ? "exact" : "DIFFERS");
    std::printf("  total bytes per site: sites >= 0.5%%: median %.1f%%, worst %.1f%% (%zu sites); "
                "small-allocation sites: median %.1f%%, worst %.1f%% (%zu); distance %.4f\n",
                100 * tb.median, 100 * tb.worst, total_big.size(), 100 * ts.median, 100 * ts.worst, total_small.size(),
                tv_total / 2);
    std::printf("  live at peak per site: sites >= 0.5%%: median %.1f%%, worst %.1f%% (%zu sites); "
                "small-allocation sites: median %.1f%%, worst %.1f%% (%zu); distance %.4f\n",
                100 * pb.median, 100 * pb.worst, peak_big.size(), 100 * ps.median, 100 * ps.worst, peak_small.size(),
                tv_peak / 2);
}

} // namespace

int main() {
    std::mt19937_64 rng(20251201);
    std::vector<SitePlan> plan(kSites);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < kSites; ++i) {
        SitePlan& p = plan[static_cast<std::size_t>(i)];
        const bool small = i % 5 != 0; // 4 in 5 sites allocate small blocks
        p.median = small ? std::exp(std::log(512.0) + u(rng) * std::log(1024.0))
                         : std::exp(std::log(1048576.0 * 1.2) + u(rng) * std::log(200.0));
        p.per_step = 1 + static_cast<int>(u(rng) * (small ? 20 : 3));
        p.keeps = i % 17 == 0;
    }
    std::printf("sampling against full capture: %d sites, %d steps (bytes scaled by N; >= 1 MiB always)\n", kSites,
                kSteps);
    for (std::uint32_t n : {8u, 64u, 512u})
        run(n, plan, 7 + n);
    return 0;
}
