// SPDX-License-Identifier: MIT
// The recorder's capture, callable from Python through ctypes (bench/capture_depth.py): it times
// Recorder::capture() itself, on the calling thread's real stack (the Python frames above it and
// the interpreter's, ctypes' and libffi's native frames between), with the CPU's time-stamp
// counter, so that the interpreter's own cost of the call is not in the figure.
#include "stacks/backtrace.hpp"
#include "stacks/frame_rules.hpp"
#include "stacks/python_frames.hpp"
#include "stacks/recorder.hpp"
#include "util/cycle_clock.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

using gpumemprof::stacks::Recorder;

namespace {

Recorder& recorder() {
    static Recorder* r = [] {
        auto* x = new Recorder();
        x->configure(128);
        return x;
    }();
    return *r;
}

gpumemprof::util::CycleClock& tsc() {
    static gpumemprof::util::CycleClock c;
    return c;
}

volatile std::uint32_t g_sink;
std::uint32_t g_last = 0;

} // namespace

extern "C" {

/// Median ns of one capture over `batches` batches of `per_batch` captures of the same stack.
__attribute__((visibility("default"), noinline)) double gpumemprof_bench_repeat(int batches, int per_batch) {
    Recorder& r = recorder();
    std::vector<double> per;
    per.reserve(static_cast<std::size_t>(batches));
    const double ns = tsc().ns_per_tick();
    for (int b = 0; b < batches; ++b) {
        const std::uint64_t t0 = gpumemprof::util::CycleClock::now();
        for (int i = 0; i < per_batch; ++i)
            g_sink = r.capture();
        const std::uint64_t t1 = gpumemprof::util::CycleClock::now();
        per.push_back(static_cast<double>(t1 - t0) * ns / per_batch);
    }
    g_last = g_sink;
    std::nth_element(per.begin(), per.begin() + per.size() / 2, per.end());
    return per[per.size() / 2];
}

/// Median ns of one capture of the same stack, `n` times, each after writing `evict` bytes of a
/// buffer of ours: the program's own work between two allocations, which moves the frames', the
/// code objects' and the records' lines out of the nearer caches.
__attribute__((visibility("default"), noinline)) double gpumemprof_bench_evicted(int n, std::size_t evict) {
    Recorder& r = recorder();
    static std::vector<unsigned char> buffer;
    buffer.resize(evict);
    std::vector<double> per;
    per.reserve(static_cast<std::size_t>(n));
    const double ns = tsc().ns_per_tick();
    for (int i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < evict; j += 64)
            buffer[j] = static_cast<unsigned char>(buffer[j] + 1);
        const std::uint64_t t0 = gpumemprof::util::CycleClock::now();
        g_sink = r.capture();
        const std::uint64_t t1 = gpumemprof::util::CycleClock::now();
        per.push_back(static_cast<double>(t1 - t0) * ns);
    }
    g_last = g_sink;
    std::nth_element(per.begin(), per.begin() + per.size() / 2, per.end());
    return per[per.size() / 2];
}
/// ns of one capture (the caller makes each one from another stack).
__attribute__((visibility("default"), noinline)) double gpumemprof_bench_once() {
    Recorder& r = recorder();
    const std::uint64_t t0 = gpumemprof::util::CycleClock::now();
    g_last = r.capture();
    const std::uint64_t t1 = gpumemprof::util::CycleClock::now();
    return static_cast<double>(t1 - t0) * tsc().ns_per_tick();
}

/// ns of reading the Python frames alone (python::capture), how many of the words the compare
/// pass took from the thread's previous capture (`compared`), and how many of those without
/// reading their code objects (`trusted`: the count of destroyed code objects).
__attribute__((visibility("default"), noinline)) double gpumemprof_bench_python_once(int* compared, int* trusted) {
    std::uintptr_t words[128];
    int n = 0;
    int t = 0;
    const std::uint64_t t0 = gpumemprof::util::CycleClock::now();
    g_sink = static_cast<std::uint32_t>(gpumemprof::stacks::python::capture(words, 128, nullptr, &n, &t));
    const std::uint64_t t1 = gpumemprof::util::CycleClock::now();
    *compared = n;
    *trusted = t;
    return static_cast<double>(t1 - t0) * tsc().ns_per_tick();
}

/// Frames of the latest stack: all, and how many of them are Python frames.
__attribute__((visibility("default"))) int gpumemprof_bench_frames(int* python) {
    const auto f = recorder().frames(g_last);
    int py = 0;
    for (std::uintptr_t w : f)
        py += (w >> 63) != 0;
    *python = py;
    return static_cast<int>(f.size());
}

/// Distinct stacks interned so far (tree nodes), and addresses the frame rules hold.
__attribute__((visibility("default"))) double gpumemprof_bench_nodes() {
    return static_cast<double>(recorder().tree_size());
}

} // extern "C"

extern "C" {
/// Breakdown for the benchmark: median ns of the native walk alone (part 0), the Python walk
/// alone (1) and interning the last stack again (2), over `batches` batches of `per_batch`.
__attribute__((visibility("default"), noinline)) double gpumemprof_bench_part(int part, int batches, int per_batch) {
    std::vector<double> per;
    std::uintptr_t ips[512];
    const double ns = tsc().ns_per_tick();
    int n = gpumemprof::stacks::capture_backtrace(ips, 128, 0);
    n += gpumemprof::stacks::python::capture(ips + n, 128);
    for (int b = 0; b < batches; ++b) {
        const std::uint64_t t0 = gpumemprof::util::CycleClock::now();
        for (int i = 0; i < per_batch; ++i) {
            if (part == 0)
                g_sink = static_cast<std::uint32_t>(gpumemprof::stacks::capture_backtrace(ips, 128, 0));
            else if (part == 1)
                g_sink = static_cast<std::uint32_t>(gpumemprof::stacks::python::capture(ips + 256, 128));
            else
                g_sink = recorder().intern(ips, n);
        }
        const std::uint64_t t1 = gpumemprof::util::CycleClock::now();
        per.push_back(static_cast<double>(t1 - t0) * ns / per_batch);
    }
    std::nth_element(per.begin(), per.begin() + per.size() / 2, per.end());
    return per[per.size() / 2];
}
}
