// SPDX-License-Identifier: MIT
// Writes two HTML reports for bench/html_load.py: a large one (50,000 call sites of 24-40 frames
// over 6,000 distinct frames, one device whose time series took 1,000,000 changes and whose
// event ring saw 1,000,000 events) and a small baseline (the same page with 10 sites and 100
// changes). Prints each file's size and the time to build and write it.
// Usage: bench_html OUT_DIR
#include "report/html_report.hpp"
#include "stats/event_ring.hpp"
#include "stats/time_series.hpp"
#include "util/atomic_file.hpp"

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

using namespace gpumemprof;

namespace {

void make(int n_sites, int n_changes, const std::string& path) {
    std::mt19937_64 rng(42);
    report::ReportInput in;
    in.exe = "bench_html";
    in.pid = 1;
    in.seconds_profiled = 100;
    report::StackReport r;
    r.ok = true;
    // Frames: a few roots, then layers of modules; each site walks down a random path.
    std::vector<report::SymbolFrame> pool;
    for (int i = 0; i < 6000; ++i) {
        report::SymbolFrame f;
        f.function = "ns::module" + std::to_string(i % 97) + "::function_" + std::to_string(i);
        f.file = "src/layer" + std::to_string(i / 600) + "/file" + std::to_string(i % 211) + ".cpp";
        f.line = static_cast<int>(10 + i % 900);
        f.module = "libapp.so";
        pool.push_back(f);
    }
    std::vector<std::uint32_t> index(pool.size());
    for (std::size_t i = 0; i < pool.size(); ++i)
        index[i] = r.resolved.frames.add(pool[i]);
    std::vector<std::uint32_t> frames;
    for (int s = 0; s < n_sites; ++s) {
        report::ResolvedSite site;
        const int depth = 24 + static_cast<int>(rng() % 17);
        frames.clear();
        for (int d = 0; d < depth; ++d) {
            // Shallow frames are shared by many sites (a tree), deep ones are spread out.
            const std::size_t span = std::min<std::size_t>(pool.size(), 4 + static_cast<std::size_t>(d) * d * 8);
            frames.push_back(index[(static_cast<std::size_t>(d) * 131 + rng() % span) % pool.size()]);
        }
        site.stack = r.resolved.stacks.add(frames);
        stacks::SiteData sd;
        sd.id = static_cast<stacks::StackId>(s + 1);
        stacks::SiteCounters& c = sd.counters;
        c.total_bytes = static_cast<std::int64_t>(512 * (1 + rng() % 100000));
        c.total_count = 1 + static_cast<std::int64_t>(rng() % 1000);
        c.peak_live_bytes = s % 3 ? 0 : c.total_bytes / 4;
        c.peak_live_count = c.peak_live_bytes ? 1 : 0;
        c.live_bytes = s % 50 ? 0 : 512;
        c.live_count = c.live_bytes ? 1 : 0;
        c.acquired_bytes = s % 7 ? 0 : 2 << 20;
        r.data.sites.push_back(sd);
        r.resolved.sites.push_back(site);
        r.resolved.site_of.push_back(static_cast<std::uint32_t>(s));
        r.resolved.by_id.emplace_back(sd.id, static_cast<std::uint32_t>(s));
    }
    // The sites' counters are the data's (filled in first: the vector no longer moves).
    for (std::size_t s = 0; s < r.resolved.sites.size(); ++s)
        r.resolved.sites[s].sum = &r.data.sites[s].counters;
    report::DeviceSummary d;
    d.device = 0;
    d.total_capacity = std::size_t{80} << 30;
    stats::TimeSeries ts;
    stats::EventRing ring;
    std::int64_t t = 0, live = 0;
    for (int i = 0; i < n_changes; ++i) {
        t += static_cast<std::int64_t>(1000 + rng() % 100000);
        const bool alloc = live <= 0 || rng() % 2;
        const std::int64_t bytes = 512 * static_cast<std::int64_t>(1 + rng() % 4096);
        ts.add(t, stats::Series::allocated, alloc ? bytes : -std::min(bytes, live));
        live += alloc ? bytes : -std::min(bytes, live);
        ts.set(t, stats::Series::reserved, std::max<std::int64_t>(ts.current(stats::Series::reserved), live));
        stats::PoolEvent e;
        e.t_ns = t;
        e.action = alloc ? stats::PoolAction::alloc : stats::PoolAction::free_requested;
        e.size = e.block_size = static_cast<std::uint64_t>(bytes);
        e.site = static_cast<std::uint32_t>(1 + rng() % static_cast<std::uint64_t>(n_sites));
        ring.push(e);
    }
    d.history.series = ts.data();
    d.history.events = ring.events();
    d.history.events_overwritten = ring.overwritten();
    in.devices.push_back(d);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string page = report::html_report(in, r);
    std::string err;
    const bool ok = util::write_file_atomic(path, page, &err);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %d sites, %d changes -> %zu buckets, %zu events kept; %.2f MB written in %.3f s%s\n", path.c_str(),
                n_sites, n_changes, d.history.series.buckets.size(), d.history.events.size(), page.size() / 1e6, secs,
                ok ? "" : (" FAILED: " + err).c_str());
}

} // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : "/tmp";
    make(10, 100, dir + "/bench-small.html");
    make(50000, 1000000, dir + "/bench-large.html");
    return 0;
}
