// SPDX-License-Identifier: MIT
// Benchmark: trace::Writer cost per event, and `gpumemprof replay` rate on one core for a synthetic
// 2M-event trace (goal: >= 2 million events/s). `bench_replay --write PATH N` only writes such a
// trace of N events, and `bench_replay --peak-rss CMD...` runs CMD and prints its peak RSS
// (bench/replay_memory.py uses both).
#include "tools/replay.hpp"
#include "trace/writer.hpp"

#include <chrono>
#include <cstdio>
#include <random>
#include <spawn.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace gpumemprof;
using Clock = std::chrono::steady_clock;

/// `--peak-rss CMD ARGS...`: run CMD and print its peak RSS (wait4). Spawned from this small
/// process, not from Python, whose own RSS would count as the child's until its exec.
int peak_rss(char** argv) {
    pid_t pid = 0;
    if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) {
        std::perror(argv[0]);
        return 127;
    }
    int status = 0;
    rusage usage{};
    if (wait4(pid, &status, 0, &usage) != pid)
        return 127;
    std::printf("peak_rss_kib %ld\n", usage.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char** argv) {
    if (argc > 2 && std::string(argv[1]) == "--peak-rss")
        return peak_rss(argv + 2);
    const bool write_only = argc == 4 && std::string(argv[1]) == "--write";
    const std::uint64_t kEvents = write_only ? std::stoull(argv[3]) : argc > 1 ? std::stoull(argv[1]) : 2000000;
    const std::string path = write_only ? argv[2] : "/tmp/gpumemprof_bench_" + std::to_string(::getpid()) + ".gmt";
    trace::Header h;
    h.devices = {{0, 80ull << 30}};
    trace::Writer w;
    if (!w.open(path, h)) {
        std::fprintf(stderr, "%s\n", w.error().c_str());
        return 1;
    }
    // Inference/training-like mix: a bounded live set (~256 blocks), sizes from 512 B to 64 MiB,
    // log-uniform, so both pools and many split/merge paths are exercised.
    std::mt19937_64 rng(7);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> live; // ptr, size
    std::uint64_t next_ptr = 0x7f0000000000;
    std::uint64_t t = 1;
    const auto w0 = Clock::now();
    for (std::uint64_t n = 0; n < kEvents; ++n) {
        const bool do_alloc = live.size() < 32 || (live.size() < 512 && (rng() & 1));
        trace::Event e;
        e.time_ns = t++;
        if (do_alloc) {
            const int shift = 9 + static_cast<int>(rng() % 17); // 512 B .. 32 MiB
            const std::uint64_t size = (1ull << shift) + rng() % (1ull << shift);
            e.type = trace::EventType::alloc;
            e.ptr = next_ptr;
            next_ptr += (size + 4095) & ~4095ull;
            e.size = size;
            e.block_size = (size + 511) & ~511ull;
            live.emplace_back(e.ptr, size);
        } else {
            const std::size_t i = rng() % live.size();
            e.type = trace::EventType::free_requested;
            e.ptr = live[i].first;
            e.size = live[i].second;
            live[i] = live.back();
            live.pop_back();
        }
        w.record(e);
        if (write_only && n % 4096 == 4095) {
            // Now and then a segment comes and goes, as in a recording (its address is planned).
            trace::Event s;
            s.time_ns = t++;
            s.type = trace::EventType::segment_alloc;
            s.ptr = next_ptr;
            s.size = s.block_size = 20ull << 20;
            w.record(s);
            s.type = trace::EventType::segment_free;
            w.record(s);
            next_ptr += 20ull << 20;
            n += 2;
        }
    }
    w.close();
    if (write_only)
        return w.error().empty() ? 0 : 1;
    const double write_s = std::chrono::duration<double>(Clock::now() - w0).count();

    const auto l0 = Clock::now();
    tools::Plan plan;
    std::string error, warning;
    if (!tools::load_plan(path, false, &plan, &error, &warning)) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 1;
    }
    const double load_s = std::chrono::duration<double>(Clock::now() - l0).count();
    double best = 1e30;
    tools::Totals tot;
    for (int rep = 0; rep < 3; ++rep) {
        const auto r0 = Clock::now();
        tot = tools::totals(tools::replay(plan, tools::ReplayOptions{}));
        best = std::min(best, std::chrono::duration<double>(Clock::now() - r0).count());
    }
    std::remove(path.c_str());
    const double n = static_cast<double>(plan.events);
    const double rate = n / best;
    const double e2e = n / (best + load_s);
    std::printf("trace: %.0f events (%.1f ns/event to record incl. file writes)\n", n, write_s * 1e9 / n);
    std::printf("load (decode + plan): %.3f s = %.2f M events/s\n", load_s, n / load_s / 1e6);
    std::printf("replay (one core, best of 3): %.3f s = %.2f M events/s; ratio to the 2 M/s goal: %.2fx\n", best,
                rate / 1e6, rate / 2e6);
    std::printf("end to end (load + replay): %.2f M events/s; ratio to goal: %.2fx\n", e2e / 1e6, e2e / 2e6);
    std::printf("(peak reserved %.1f MiB, %lld device allocs, %lld OOMs)\n",
                static_cast<double>(tot.reserved_peak) / (1 << 20), static_cast<long long>(tot.device_allocs),
                static_cast<long long>(tot.ooms));
    return rate >= 2e6 ? 0 : 1;
}
