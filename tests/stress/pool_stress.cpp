// SPDX-License-Identifier: MIT
// DevicePool under 8 threads: mixed sizes and streams, cross-thread frees, concurrent stats,
// snapshots, fence processing and empty_cache. Deterministic seeds; meant to run under TSan too.
#include "pool/device_pool.hpp"
#include "pool/sim_backend.hpp"
#include "stress_check.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

using namespace gpumemprof;
using namespace gpumemprof::pool;

namespace {

constexpr std::size_t MiB = 1024 * 1024;
/// Pointers handed from one thread to another, freed by the receiver.
struct Mailbox {
    std::mutex mu;
    std::vector<std::uintptr_t> ptrs;
};

void run(const char* label, bool defer, bool busy_fences, int threads, int ops,
         const char* conf = "max_split_size_mb:64,roundup_power2_divisions:4") {
    SimBackend dev(std::size_t{64} << 30);
    if (busy_fences)
        dev.set_fences_busy(true);
    PoolOptions o;
    o.conf = parse_alloc_conf(conf, nullptr);
    o.defer_frees = defer;
    DevicePool pool(dev, o);
    std::vector<Mailbox> boxes(static_cast<std::size_t>(threads));
    std::atomic<int> done{0};
    // Up to ~8 x 200 live blocks of 10-100 MiB can exceed the 64 GiB device depending on how the
    // threads interleave: an out-of-memory answer is then correct, and must be counted as one.
    std::atomic<long> mallocs{0}, bad{0}, ooms{0};

    auto worker = [&](int id) {
        std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(id));
        std::vector<std::uintptr_t> mine;
        for (int i = 0; i < ops; ++i) {
            const auto op = rng() % 100;
            if (op < 50 || mine.empty()) {
                const auto r = rng() % 100;
                const std::size_t size = r < 70   ? rng() % 65536
                                         : r < 95 ? rng() % (8 * MiB)
                                                  : 10 * MiB + rng() % (90 * MiB);
                // Streams: one per thread and one shared by all (0).
                const std::uintptr_t stream = rng() % 2 ? 0 : static_cast<std::uintptr_t>(100 + id);
                std::uintptr_t p = 0;
                const int r2 = pool.malloc(size, stream, &p);
                if (r2 == kSuccess) {
                    mine.push_back(p);
                    ++mallocs;
                } else if (r2 == kOutOfMemory) {
                    ++ooms;
                } else {
                    ++bad;
                }
            } else if (op < 80) {
                const std::size_t k = rng() % mine.size();
                if (pool.free(mine[k]) != kSuccess)
                    ++bad;
                mine[k] = mine.back();
                mine.pop_back();
            } else if (op < 92) {
                // Hand one pointer to another thread.
                const std::size_t k = rng() % mine.size();
                auto& box = boxes[rng() % boxes.size()];
                {
                    std::lock_guard<std::mutex> lock(box.mu);
                    box.ptrs.push_back(mine[k]);
                }
                mine[k] = mine.back();
                mine.pop_back();
            } else {
                std::vector<std::uintptr_t> got;
                {
                    std::lock_guard<std::mutex> lock(boxes[static_cast<std::size_t>(id)].mu);
                    got.swap(boxes[static_cast<std::size_t>(id)].ptrs);
                }
                for (auto p : got)
                    if (pool.free(p) != kSuccess)
                        ++bad;
            }
        }
        for (auto p : mine)
            if (pool.free(p) != kSuccess)
                ++bad;
        ++done;
    };

    // A monitor thread reads everything the reports read, while the workers run.
    auto monitor = [&] {
        int n = 0;
        while (done.load() < threads) {
            const auto s = pool.stats();
            EXPECT(s.allocated_bytes[stats::kAll].current <= s.reserved_bytes[stats::kAll].current);
            if (n % 4 == 0)
                (void)pool.snapshot();
            if (n % 8 == 0)
                pool.process_fences();
            if (n % 32 == 0)
                pool.empty_cache();
            if (busy_fences && n % 2 == 0)
                dev.complete_fences();
            (void)pool.releasable_bytes();
            ++n;
            std::this_thread::yield();
        }
    };

    stress::run_beside(threads, worker, monitor);
    // Whatever is still in a mailbox is freed by the main thread.
    for (auto& box : boxes)
        for (auto p : box.ptrs)
            if (pool.free(p) != kSuccess)
                ++bad;

    // From here the device is idle: new fences complete at once, older ones are finished.
    dev.set_fences_busy(false);
    dev.complete_fences();
    pool.process_fences();
    const auto s = pool.stats();
    EXPECT(bad.load() == 0);
    EXPECT(s.num_ooms == ooms.load());
    EXPECT(pool.invalid_frees() == 0);
    EXPECT(s.allocation[stats::kAll].current == 0);
    EXPECT(s.allocated_bytes[stats::kAll].current == 0);
    EXPECT(s.active[stats::kAll].current == 0);
    EXPECT(s.active_bytes[stats::kAll].current == 0);
    EXPECT(s.requested_bytes[stats::kAll].current == 0);
    EXPECT(s.inactive_split[stats::kAll].current == 0);
    EXPECT(static_cast<std::int64_t>(pool.releasable_bytes()) == s.reserved_bytes[stats::kAll].current);
    EXPECT(static_cast<std::int64_t>(dev.used_bytes()) == s.reserved_bytes[stats::kAll].current);
    EXPECT(s.allocation[stats::kAll].allocated == mallocs.load());
    pool.empty_cache();
    EXPECT(dev.used_bytes() == 0);
    EXPECT(dev.counters().bad_releases == 0);
    EXPECT(dev.counters().bad_vmm_calls == 0);
    std::printf("%-28s threads=%d mallocs=%ld segments=%lld retries=%lld\n", label, threads, mallocs.load(),
                static_cast<long long>(s.num_device_alloc), static_cast<long long>(s.num_alloc_retries));
}

} // namespace

int main(int argc, char** argv) {
    const int ops = argc > 1 ? std::atoi(argv[1]) : 20000;
    run("immediate frees", false, false, 8, ops);
    run("deferred, fences done", true, false, 8, ops);
    run("deferred, busy fences", true, true, 8, ops);
    run("expandable, busy fences", true, true, 8, ops, "expandable_segments:True");
    if (stress::failures != 0) {
        std::fprintf(stderr, "%d check(s) failed\n", stress::failures);
        return 1;
    }
    std::printf("pool_stress: OK\n");
    return 0;
}
