// SPDX-License-Identifier: MIT
// Settings grid, parallel replays, ranking.
#include "tools/sweep.hpp"

#include "pool/rounding.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <tuple>

namespace gpumemprof::tools {
namespace {

int count_keys(const std::string& text) {
    if (text.empty())
        return 0;
    int n = 1;
    int depth = 0;
    for (char c : text) {
        if (c == '[')
            ++depth;
        else if (c == ']')
            --depth;
        else if (c == ',' && depth == 0)
            ++n;
    }
    return n;
}

void add(std::vector<SweepEntry>& out, const std::string& text, bool recorded) {
    std::vector<std::string> warnings;
    SweepEntry e;
    e.conf = pool::parse_alloc_conf(text, &warnings);
    if (!warnings.empty())
        return;
    e.conf.source.clear(); // compare meaning, not spelling
    e.label = text;        // as written: the list form reads better than its expanded table
    e.keys = count_keys(text);
    e.recorded = recorded;
    for (auto& old : out)
        if (old.conf == e.conf) {
            old.recorded = old.recorded || recorded;
            return;
        }
    out.push_back(std::move(e));
}

} // namespace

std::vector<SweepEntry> sweep_grid(const Plan& plan, bool capacity_known, const std::string& recorded_conf) {
    constexpr std::uint64_t kMiB = 1 << 20;
    // Largest segment a request of the trace gets (PyTorch's get_allocation_size of the largest
    // request, rounded as with the default settings): a max_split_size or rounding limit above it
    // cannot change anything.
    const std::uint64_t biggest = plan.max_request;
    const std::uint64_t max_segment =
        pool::allocation_size(pool::round_size(pool::AllocConf{}, static_cast<std::size_t>(biggest)));
    std::vector<std::string> split = {""};
    if (biggest > kMiB) { // only large-pool blocks can be oversize
        for (std::uint64_t mb : {20, 32, 64, 128, 256, 512, 1024, 2048, 4096})
            if (mb * kMiB <= max_segment)
                split.push_back("max_split_size_mb:" + std::to_string(mb));
    }
    std::vector<std::string> rounding = {""};
    for (std::uint64_t mb : {64, 256})
        if (mb * kMiB <= max_segment)
            rounding.push_back("max_non_split_rounding_mb:" + std::to_string(mb));
    const std::vector<std::string> divisions = {"",
                                                "roundup_power2_divisions:2",
                                                "roundup_power2_divisions:4",
                                                "roundup_power2_divisions:8",
                                                "roundup_power2_divisions:16",
                                                "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"};
    std::vector<std::string> gc = {""};
    if (capacity_known) {
        gc.push_back("garbage_collection_threshold:0.6,per_process_memory_fraction:1.0");
        gc.push_back("garbage_collection_threshold:0.8,per_process_memory_fraction:1.0");
    }
    std::vector<SweepEntry> out;
    auto join = [](std::initializer_list<const std::string*> parts) {
        std::string s;
        for (const std::string* p : parts)
            if (!p->empty())
                s += (s.empty() ? "" : ",") + *p;
        return s;
    };
    for (const auto& ms : split)
        for (const auto& nsr : rounding) {
            if (ms.empty() && !nsr.empty())
                continue; // only oversize requests look at it
            for (const auto& dv : divisions)
                for (const auto& g : gc)
                    add(out, join({&ms, &nsr, &dv, &g}), false);
        }
    // Expandable segments, with each rounding (garbage collection and the oversize rules only look at
    // whole segments, which an expandable range never gives back: left out).
    const std::string expandable = "expandable_segments:True";
    for (const auto& dv : divisions)
        add(out, join({&expandable, &dv}), false);
    if (!recorded_conf.empty())
        add(out, recorded_conf, true);
    else if (!out.empty())
        out.front().recorded = true; // recorded with the defaults
    return out;
}

void run_sweep(const Plan& plan, std::vector<SweepEntry>& entries, std::uint64_t capacity, unsigned jobs,
               const std::function<void(std::size_t, std::size_t)>& progress, double progress_every_s) {
    if (jobs == 0)
        jobs = std::max(1u, std::thread::hardware_concurrency());
    jobs = static_cast<unsigned>(std::min<std::size_t>(jobs, std::max<std::size_t>(entries.size(), 1)));
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> done{0};
    std::mutex mu;
    std::condition_variable cv;
    std::exception_ptr failure; // the first replay that failed (out of host memory): rethrown below
    auto worker = [&] {
        for (;;) {
            const std::size_t i = next.fetch_add(1);
            if (i >= entries.size())
                break;
            try {
                ReplayOptions o;
                o.conf = entries[i].conf;
                o.capacity = capacity;
                entries[i].totals = totals(replay(plan, o));
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!failure)
                    failure = std::current_exception();
            }
            done.fetch_add(1);
            cv.notify_one();
        }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < jobs; ++t) {
        try {
            threads.emplace_back(worker);
        } catch (...) {
            break; // no more threads (a memory or process limit): those started do the rest
        }
    }
    if (threads.empty())
        worker(); // not even one: the work is done on this thread
    const auto period = std::chrono::duration<double>(progress_every_s);
    {
        std::unique_lock<std::mutex> lock(mu);
        auto last = std::chrono::steady_clock::now();
        while (done.load() < entries.size()) {
            cv.wait_for(lock, std::chrono::milliseconds(100));
            const auto now = std::chrono::steady_clock::now();
            if (progress && now - last >= period) {
                progress(done.load(), entries.size());
                last = now;
            }
        }
    }
    for (auto& t : threads)
        t.join();
    if (failure)
        std::rethrow_exception(failure);
}

void rank(std::vector<SweepEntry>& entries) {
    std::vector<std::size_t> order(entries.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    auto key = [&](std::size_t i) {
        const Totals& t = entries[i].totals;
        return std::make_tuple(t.ooms, t.reserved_peak, t.device_allocs, entries[i].keys, i);
    };
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    std::vector<SweepEntry> sorted;
    sorted.reserve(entries.size());
    for (std::size_t i : order)
        sorted.push_back(std::move(entries[i]));
    entries = std::move(sorted);
}

} // namespace gpumemprof::tools
