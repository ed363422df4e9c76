// SPDX-License-Identifier: MIT
// The memory history (core::PoolEvents: time series and latest events, kept for the HTML report
// and the pickle) under threads: 4 threads allocate and free through one DevicePool whose
// listener it is (feeding the PyTorch-allocator model too), while a reader copies the history and
// calls empty_cache as the report thread and torch.cuda.empty_cache do. The history has no lock of its own (the pool's
// guards it), so this is meant to run under TSan. At the end the history must agree with the pool's own stats.
#include "core/oom_notices.hpp"
#include "core/pool_events.hpp"
#include "pool/device_pool.hpp"
#include "pool/pool_model.hpp"
#include "pool/sim_backend.hpp"
#include "stacks/recorder.hpp"
#include "stress_check.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

using namespace gpumemprof;
using namespace gpumemprof::pool;

namespace {

constexpr int kA = static_cast<int>(stats::Series::allocated);
constexpr int kR = static_cast<int>(stats::Series::reserved);
constexpr int kW = static_cast<int>(stats::Series::waiting);
constexpr int kM = static_cast<int>(stats::Series::model_reserved);

void run(const char* label, bool defer, int threads, int ops) {
    SimBackend dev(std::size_t{16} << 30);
    PoolOptions o;
    o.defer_frees = defer;
    const AllocConf conf;
    PoolModel model(conf, 0, std::size_t{16} << 30); // the PyTorch-allocator model, fed by the listener
    const core::PoolEventSinks sinks{stacks::Recorder::instance(), core::OomNotices::instance(), nullptr, &model};
    core::PoolEvents events(0, conf, sinks, std::chrono::steady_clock::now(), true);
    DevicePool pool(dev, o, &events);
    std::atomic<int> done{0};
    std::atomic<long> mallocs{0}, frees{0}, bad{0};

    auto worker = [&](int id) {
        std::mt19937_64 rng(77 + static_cast<std::uint64_t>(id));
        std::vector<std::uintptr_t> mine;
        for (int i = 0; i < ops; ++i) {
            if (rng() % 2 || mine.empty()) {
                const std::size_t size = rng() % 3 ? 512 + rng() % 65536 : (1 << 20) + rng() % (16 << 20);
                std::uintptr_t p = 0;
                if (pool.malloc(size, 0, &p) == kSuccess) {
                    mine.push_back(p);
                    ++mallocs;
                } else {
                    ++bad;
                }
            } else {
                const std::size_t k = rng() % mine.size();
                if (pool.free(mine[k]) == kSuccess)
                    ++frees;
                else
                    ++bad;
                mine[k] = mine.back();
                mine.pop_back();
            }
        }
        for (auto p : mine)
            if (pool.free(p) == kSuccess)
                ++frees;
        ++done;
    };
    // The report thread's reads and empty_cache, while the workers run.
    auto reader = [&] {
        int n = 0;
        while (done.load() < threads) {
            stats::SeriesData series;
            std::vector<stats::PoolEvent> ev;
            std::uint64_t overwritten = 0;
            events.history(pool, &series, &ev, &overwritten);
            EXPECT(ev.size() <= stats::EventRing::kDefaultCapacity);
            for (const stats::SeriesBucket& b : series.buckets)
                EXPECT(b.min[kA] >= 0 && b.min[kA] <= b.max[kA] && b.max[kA] <= series.peak_allocated);
            if (n % 16 == 0) {
                const std::int64_t reserved = pool.stats().reserved_bytes[stats::kAll].current;
                pool.empty_cache();
                model.empty_cache(); // as Profiler::empty_cache: outside the pool's lock
                events.on_empty_cache(pool, reserved);
            }
            ++n;
            std::this_thread::yield();
        }
    };
    stress::run_beside(threads, worker, reader);
    pool.process_fences();

    const auto s = pool.stats();
    stats::SeriesData series;
    std::vector<stats::PoolEvent> ev;
    std::uint64_t overwritten = 0;
    events.history(pool, &series, &ev, &overwritten);
    EXPECT(bad.load() == 0);
    EXPECT(mallocs.load() == frees.load());
    EXPECT(!series.buckets.empty());
    if (series.buckets.empty())
        return;
    const stats::SeriesBucket& last = series.buckets.back();
    // Everything was freed, and (fences done) is reusable; what stays reserved is the pool's.
    EXPECT(last.last[kA] == 0);
    EXPECT(last.last[kW] == 0); // nothing waits for a fence either
    EXPECT(last.last[kR] == s.reserved_bytes[stats::kAll].current);
    EXPECT(last.last[kM] == model.stats().reserved_bytes[stats::kAll].current);
    // The history's peak is the pool's own peak: both change under the same lock.
    EXPECT(series.peak_allocated == s.allocated_bytes[stats::kAll].peak);
    EXPECT(series.peak_reserved == s.reserved_bytes[stats::kAll].peak);
    // Every allocation and free is one event (the ring keeps the latest, counts the rest).
    const auto allocs = std::count_if(ev.begin(), ev.end(),
                                      [](const stats::PoolEvent& e) { return e.action == stats::PoolAction::alloc; });
    EXPECT(static_cast<std::uint64_t>(ev.size()) + overwritten >= 3 * static_cast<std::uint64_t>(mallocs.load()));
    EXPECT(allocs <= mallocs.load());
    std::printf("%-20s threads=%d mallocs=%ld events=%zu overwritten=%llu buckets=%zu peak=%lld\n", label, threads,
                mallocs.load(), ev.size(), static_cast<unsigned long long>(overwritten), series.buckets.size(),
                static_cast<long long>(series.peak_allocated));
}

} // namespace

int main(int argc, char** argv) {
    const int ops = argc > 1 ? std::atoi(argv[1]) : 20000;
    run("immediate frees", false, 4, ops);
    run("deferred frees", true, 4, ops);
    if (stress::failures != 0) {
        std::fprintf(stderr, "%d check(s) failed\n", stress::failures);
        return 1;
    }
    std::printf("history_stress: OK\n");
    return 0;
}
