// SPDX-License-Identifier: MIT
// Benchmark: stack capture + interning of a 32-frame stack (median ns per call), with baselines
// measured in the same run: libunwind alone, and the recorder's per-event accounting; and the
// same repeated capture with 8 and 64 native frames kept (what a frame more costs once the walk
// meets the thread's previous walk).
#include "stacks/backtrace.hpp"
#include "stacks/recorder.hpp"

#include <libunwind.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

using namespace gpumemprof::stacks;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kBatch = 200;
constexpr int kBatches = 300;

template <typename F> double median_ns(F&& f) {
    std::vector<double> per_call;
    per_call.reserve(kBatches);
    for (int b = 0; b < kBatches; ++b) {
        const auto t0 = Clock::now();
        for (int i = 0; i < kBatch; ++i)
            f();
        const auto t1 = Clock::now();
        per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
    }
    std::nth_element(per_call.begin(), per_call.begin() + kBatches / 2, per_call.end());
    return per_call[kBatches / 2];
}

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
    return 0;
}
