// SPDX-License-Identifier: MIT
// Benchmark: stack capture + interning of a 32-frame stack (median ns per call), with baselines
// measured in the same run: libunwind alone, and the recorder's per-event accounting; and the
// same repeated capture with 8 and 64 native frames kept (what a frame more costs once the walk
// meets the thread's previous walk); and a walk whose inner part changes from one capture to the
// next (two middle paths of different depths alternate under a common outer part and a common
// inner one, as consecutive allocations from different operators do), with the caches flushed
// between captures (a framework's work between two allocations evicts the walk's data), against
// the same captures with warm caches.
#include "median_ns.hpp"
#include "stacks/backtrace.hpp"
#include "stacks/recorder.hpp"

#include <libunwind.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

using namespace gpumemprof::stacks;
using Clock = std::chrono::steady_clock;
using gpumemprof::bench::median_ns;

namespace {

volatile StackId sink;
double capture_ns, unwind_ns, account_ns;
int frames_seen;
double depth_ns[2];
int depth_frames[2];

__attribute__((noinline)) void at_depth() {
    Recorder& r = Recorder::instance();
    r.configure(32);
    frames_seen = static_cast<int>(r.frames(r.capture()).size());
    capture_ns = median_ns([&] { sink = r.capture(); });
    unwind_ns = median_ns([] {
        void* ips[40];
        sink = static_cast<StackId>(unw_backtrace(ips, 33));
    });
}

__attribute__((noinline)) void descend(int n) {
    if (n == 0)
        at_depth();
    else
        descend(n - 1);
    asm volatile("" ::: "memory");
}

/// Capture (depth 128) of the whole stack at `n` frames of recursion below main, into slot `k`.
__attribute__((noinline)) void deep_capture(int n, int k) {
    if (n > 0) {
        deep_capture(n - 1, k);
        asm volatile("" ::: "memory");
        return;
    }
    Recorder& r = Recorder::instance();
    r.configure(128);
    depth_frames[k] = static_cast<int>(r.frames(r.capture()).size());
    depth_ns[k] = median_ns([&] { sink = r.capture(); });
}

// ---- alternating middle paths, cold caches
std::vector<unsigned char> g_junk(std::size_t{32} << 20); // larger than the last-level cache
volatile unsigned g_junk_sum;
bool g_cold;
std::vector<double> g_alt_ns; // each capture's time
int g_alt_frames, g_alt_shadow;
std::uintptr_t g_ips[128];

void evict() {
    unsigned sum = 0;
    for (std::size_t i = 0; i < g_junk.size(); i += 64)
        sum += g_junk[i]++;
    g_junk_sum = sum;
}

__attribute__((noinline)) void alt_inner(int n) {
    if (n > 0) {
        alt_inner(n - 1);
        asm volatile("" ::: "memory");
        return;
    }
    if (g_cold)
        evict();
    const auto t0 = Clock::now();
    WalkInfo info;
    g_alt_frames = capture_backtrace(g_ips, 128, 0, &info);
    const auto t1 = Clock::now();
    g_alt_shadow = info.from_shadow;
    g_alt_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
}
/// A middle path of `n` frames of `Pad` bytes each (two sizes: two functions of their own; two
/// tags of one size: two functions whose frames are alike but for their return addresses).
template <int Pad, int Tag = 0> __attribute__((noinline)) void alt_mid(int n) {
    volatile char pad[Pad];
    pad[0] = Tag;
    asm volatile("" : : "r"(&pad[0]) : "memory");
    if (n > 0)
        alt_mid<Pad, Tag>(n - 1);
    else
        alt_inner(10);
    asm volatile("" ::: "memory");
}
/// The median ns of a capture: `captures` of them, the middle path alternating, caches cold or warm.
/// `same_depth`: the two paths have the same frames but for their code (one operator after
/// another at the same depth: the first frame is the same, the walk meets its own path again
/// further out).
/// `paths` > 2: that many paths at one depth, by turns (a framework's operators, one after another).
__attribute__((noinline)) double alt_outer(int n, bool cold, int captures, bool same_depth = false, int paths = 2) {
    if (n > 0) {
        const double r = alt_outer(n - 1, cold, captures, same_depth, paths);
        asm volatile("" ::: "memory");
        return r;
    }
    g_cold = cold;
    g_alt_ns.clear();
    for (int i = 0; i < captures; ++i) {
        if (paths > 2) {
            static void (*const kSameDepth[])(int) = {alt_mid<48>,    alt_mid<48, 1>, alt_mid<48, 2>,
                                                      alt_mid<48, 3>, alt_mid<48, 4>, alt_mid<48, 5>};
            kSameDepth[i % std::min(paths, 6)](10);
        } else if (i % 2 == 0)
            alt_mid<48>(10);
        else if (same_depth)
            alt_mid<48, 1>(10);
        else
            alt_mid<176>(14);
    }
    std::nth_element(g_alt_ns.begin(), g_alt_ns.begin() + captures / 2, g_alt_ns.end());
    return g_alt_ns[captures / 2];
}

} // namespace

int main() {
    descend(40); // deeper than 32 so every capture keeps exactly 32 frames

    Recorder& r = Recorder::instance();
    std::uintptr_t p = 0x100000;
    account_ns = median_ns([&] {
        r.on_alloc(0, p, 512, 512, 1);
        r.on_free(0, p);
        p += 512;
    });

    std::printf("frames kept per stack:                 %d\n", frames_seen);
    std::printf("capture + intern (32 frames), median:  %.0f ns\n", capture_ns);
    std::printf("baseline unw_backtrace only (32):      %.0f ns\n", unwind_ns);
    std::printf("baseline on_alloc + on_free (no stack): %.0f ns\n", account_ns);
    std::printf("ratio capture+intern / unwind only:    %.2f\n", capture_ns / unwind_ns);
    std::printf("target < 1000 ns: %s\n", capture_ns < 1000.0 ? "met" : "NOT met");

    double shallow = 0, deep = 0;
    for (int round = 0; round < 5; ++round) { // alternating; the mean of the rounds' medians
        deep_capture(2, 0);
        deep_capture(58, 1);
        shallow += depth_ns[0] / 5;
        deep += depth_ns[1] / 5;
    }
    std::printf("repeated capture, %d / %d native frames:  %.0f / %.0f ns (ratio %.2f, %.1f ns a frame more)\n",
                depth_frames[0], depth_frames[1], shallow, deep, deep / shallow,
                (deep - shallow) / (depth_frames[1] - depth_frames[0]));

    // Alternating middle paths: warm, then cold, 5 rounds; the mean of the rounds' medians.
    double warm = 0, cold = 0;
    alt_outer(30, false, 200); // rules learnt
    for (int round = 0; round < 5; ++round) {
        warm += alt_outer(30, false, 2000) / 5;
        cold += alt_outer(30, true, 400) / 5;
    }
    std::printf("alternating middle paths, %d frames (%d from the previous walk): warm %.0f ns, cold caches %.0f ns "
                "(ratio %.2f)\n",
                g_alt_frames, g_alt_shadow, warm, cold, cold / warm);
    warm = cold = 0;
    alt_outer(30, false, 200, true);
    for (int round = 0; round < 5; ++round) {
        warm += alt_outer(30, false, 2000, true) / 5;
        cold += alt_outer(30, true, 400, true) / 5;
    }
    std::printf("alternating middle paths at one depth, %d frames (%d from a remembered walk): warm %.0f ns, cold "
                "caches %.0f ns (ratio %.2f)\n",
                g_alt_frames, g_alt_shadow, warm, cold, cold / warm);
    // Six paths at one depth by turns, past the walks after which a thread remembers many.
    warm = cold = 0;
    alt_outer(30, false, 600, true, 6);
    for (int round = 0; round < 5; ++round) {
        warm += alt_outer(30, false, 1998, true, 6) / 5;
        cold += alt_outer(30, true, 402, true, 6) / 5;
    }
    std::printf("six middle paths at one depth by turns, %d frames (%d from a remembered walk): warm %.0f ns, cold "
                "caches %.0f ns (ratio %.2f)\n",
                g_alt_frames, g_alt_shadow, warm, cold, cold / warm);
    return 0;
}
