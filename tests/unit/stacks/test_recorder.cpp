// SPDX-License-Identifier: MIT
// Recorder: real stack capture from known call sites, depth control, accounting and collect().
#include "stacks/recorder.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <pthread.h>
#include <thread>
#include <vector>

using gpumemprof::stacks::Recorder;
using gpumemprof::stacks::StackId;

namespace {

__attribute__((noipa)) StackId capture_here(Recorder& r) {
    StackId id = r.capture();
    asm volatile("" ::: "memory"); // keep the call from becoming a tail call
    return id;
}

__attribute__((noipa)) StackId capture_a(Recorder& r) {
    StackId id = capture_here(r);
    asm volatile("" ::: "memory");
    return id;
}

__attribute__((noipa)) StackId capture_b(Recorder& r) {
    StackId id = capture_here(r);
    asm volatile("" ::: "memory");
    return id;
}

} // namespace
// noipa: identical bodies must not be folded into one function (-fipa-icf).

TEST_CASE("recorder: the same call path gives the same id, another path another id", "[recorder]") {
    Recorder r;
    StackId ids[2] = {0, 0};
    // An opaque trip count keeps the loop from being peeled into two call sites.
    int n = 2;
    asm volatile("" : "+r"(n));
    for (int i = 0; i < n; ++i)
        ids[i] = capture_a(r);
    const StackId a1 = ids[0], a2 = ids[1];
    const StackId b = capture_b(r);
    REQUIRE(a1 != 0);
    CHECK(a1 == a2);
    CHECK(a1 != b);
    const auto fa = r.frames(a1);
    const auto fb = r.frames(b);
    REQUIRE(fa.size() >= 3);
    REQUIRE(fb.size() >= 3);
    // The innermost frame is the call inside capture_here (same in both), the next differs.
    CHECK(fa[0] == fb[0]);
    CHECK(fa[1] != fb[1]);
    const auto here = reinterpret_cast<std::uintptr_t>(&capture_here);
    CHECK(fa[0] > here);
    CHECK(fa[0] < here + 256);
}

TEST_CASE("recorder: depth limit and capture off", "[recorder]") {
    Recorder r;
    r.configure(2);
    CHECK(r.frames(capture_a(r)).size() == 2);
    r.configure(0);
    CHECK(capture_a(r) == 0);
    r.configure(100000); // clamped, not refused
    CHECK(r.max_depth() == gpumemprof::stacks::kMaxFrames);
}

TEST_CASE("recorder: accounting through the public API and collect", "[recorder]") {
    Recorder r;
    const StackId a = capture_a(r);
    const StackId b = capture_b(r);
    r.on_acquire(0, 2097152, a);
    r.on_alloc(0, 0x7000, 1024, 1000, a);
    r.on_alloc(0, 0x8000, 512, 512, b);
    r.on_free(0, 0x7000);
    gpumemprof::pool::OomInfo info;
    info.requested = 1 << 30;
    CHECK(r.on_oom(0, info, b, "try less") == 1); // the OOM's number, which its split refers to
    const auto d = r.collect();
    CHECK(d.peak_bytes == 1536);
    CHECK(d.live_bytes == 512);
    REQUIRE(d.sites.size() == 2);
    for (const auto& s : d.sites) {
        CHECK(s.frames == r.frames(s.id));
        if (s.id == a) {
            CHECK(s.counters.peak_live_bytes == 1024);
            CHECK(s.counters.acquired_bytes == 2097152);
            CHECK(s.counters.live_bytes == 0);
        } else {
            CHECK(s.counters.peak_live_bytes == 512);
            CHECK(s.counters.live_bytes == 512);
        }
    }
    REQUIRE(d.ooms.size() == 1);
    CHECK(d.ooms[0].info.requested == (1u << 30));
    CHECK(d.ooms[0].frames == r.frames(b));
    CHECK(d.ooms[0].suggestion == "try less");
    CHECK(d.ooms[0].seq == 1);

    std::this_thread::sleep_for(std::chrono::milliseconds(2)); // (the tick rate is known after 1 ms)
    const auto before = r.capture_stats();
    CHECK(before.captures == 2);
    CHECK(before.unwind_seconds > 0);
    CHECK(before.python_seconds > 0); // (the look for Python frames is timed even when there are none)
    r.reset_after_fork();
    const auto c = r.collect();
    CHECK(c.live_bytes == 0);
    CHECK(c.ooms.empty());
    // The child's report counts its own captures only: every counter starts again from zero.
    const auto after = r.capture_stats();
    CHECK(after.captures == 0);
    CHECK(after.frames == 0);
    CHECK(after.unwind_seconds == 0);
    CHECK(after.python_seconds == 0);
    CHECK(after.intern_seconds == 0);
    // A forked child goes on numbering: its OOMs never take the number of one of the parent's.
    CHECK(r.on_oom(0, info, b, "") == 2);
    CHECK(r.frames(a).size() == d.sites[0].frames.size() + 0); // tree kept
}

// Not in the ThreadSanitizer run ('[unwind_threads]', not '[threads]'): libunwind frees its
// per-thread cache from a thread-specific-data destructor that runs after TSan has retired the
// exiting thread, and TSan crashes in the lock that destructor takes (seen with GCC 12).
TEST_CASE("recorder: capture toggled at runtime while threads capture", "[recorder][unwind_threads]") {
    Recorder r;
    std::atomic<bool> stop{false};
    std::atomic<long> with_stack{0}, without{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; ++t) {
        ts.emplace_back([&] {
            while (!stop.load()) {
                const StackId id = capture_a(r);
                (id != 0 ? with_stack : without).fetch_add(1);
                if (id != 0 && r.frames(id).empty())
                    without.store(-1000000); // an id without frames: fails the check below
            }
        });
    }
    // Toggle until the threads have captured in both states a good number of times (they may be
    // scheduled late on a loaded machine), at most 20 s.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int i = 0;
         (i < 2000 || with_stack.load() < 100 || without.load() < 100) && std::chrono::steady_clock::now() < deadline;
         ++i) {
        r.configure(i % 2 == 0 ? 0 : 16);
        std::this_thread::yield();
    }
    r.configure(16);
    stop = true;
    for (auto& t : ts)
        t.join();
    CHECK(with_stack.load() > 0);
    CHECK(without.load() >= 0);
    const auto stats = r.capture_stats();
    CHECK(stats.captures == static_cast<std::uint64_t>(with_stack.load()));
    CHECK(stats.frames <= 16 * stats.captures);
}

TEST_CASE("recorder: concurrent threads allocate and free consistently", "[recorder][threads]") {
    Recorder r;
    constexpr int kThreads = 4;
    constexpr int kBlocks = 5000;
    // Captured here, not in the threads: see the note on '[unwind_threads]' above.
    StackId ids[kThreads];
    for (StackId& id : ids)
        id = capture_a(r);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
        ts.emplace_back([&r, t, id = ids[t]] {
            for (int i = 0; i < kBlocks; ++i) {
                const auto p = static_cast<std::uintptr_t>(0x10000000u * (t + 1) + i * 512u);
                r.on_alloc(0, p, 512, 512, id);
                if (i % 2 == 0)
                    r.on_free(0, p);
            }
        });
    }
    for (auto& t : ts)
        t.join();
    // Each thread keeps its 2500 odd blocks: 4 * 2500 * 512 = 5120000 bytes live.
    const auto d = r.collect();
    CHECK(d.live_bytes == 5120000);
    CHECK(d.live_count == 10000);
    CHECK(d.events == 4u * (5000 + 2500));
}

namespace {

/// Two call sites in one function: the same caller chain, another innermost frame.
__attribute__((noipa)) StackId two_lines(Recorder& r, int which) {
    StackId id = 0;
    // Different instructions after each call keep the compiler from merging the two calls.
    if (which == 0) {
        id = r.capture();
        asm volatile("nop" ::: "memory");
    } else {
        id = r.capture();
        asm volatile("nop\n\tnop" ::: "memory");
    }
    return id;
}

} // namespace

TEST_CASE("recorder: alternating stacks never get the previous capture's id", "[recorder]") {
    Recorder r;
    int n = 6;
    asm volatile("" : "+r"(n));
    std::vector<StackId> line0, line1, via_a, via_b;
    for (int i = 0; i < n; ++i) {
        line0.push_back(two_lines(r, 0));
        line1.push_back(two_lines(r, 1));
        via_a.push_back(capture_a(r));
        via_b.push_back(capture_b(r));
    }
    const auto f0 = r.frames(line0[0]), f1 = r.frames(line1[0]);
    REQUIRE(f0.size() >= 3);
    REQUIRE(f0[0] != f1[0]); // the scenario: two lines of one function
    // (The frames above differ too: the two calls of two_lines below are two lines as well.)
    for (int i = 0; i < n; ++i) {
        CHECK(line0[i] == line0[0]);
        CHECK(line1[i] == line1[0]);
        CHECK(via_a[i] == via_a[0]);
        CHECK(via_b[i] == via_b[0]);
    }
    CHECK(line0[0] != line1[0]);
    CHECK(via_a[0] != via_b[0]);
    CHECK(r.frames(via_a[0])[1] != r.frames(via_b[0])[1]); // another caller
    // Repeats of one stack are answered without the tree: the previous capture or the stack cache.
    const auto s = r.capture_stats();
    CHECK(s.captures == static_cast<std::uint64_t>(4 * n));
    CHECK(s.cache_hits == static_cast<std::uint64_t>(4 * (n - 1)));
    // Their native walks stopped where they met the previous one (after the rules were learnt).
    CHECK(s.shadow_hits >= static_cast<std::uint64_t>(4 * (n - 2)));
    CHECK(s.shadow_frames >= s.shadow_hits);
    CHECK(s.shadow_frames <= s.frames);
}

TEST_CASE("recorder: a new thread's first capture is its own stack", "[recorder][unwind_threads]") {
    Recorder r;
    StackId a = 0, b = 0;
    std::uintptr_t self_a = 0, self_b = 0;
    std::thread([&] {
        self_a = reinterpret_cast<std::uintptr_t>(::pthread_self());
        a = capture_a(r);
    }).join();
    std::thread([&] {
        self_b = reinterpret_cast<std::uintptr_t>(::pthread_self());
        b = capture_b(r);
    }).join();
    REQUIRE(a != 0);
    REQUIRE(b != 0);
    CHECK(a != b);
    CHECK(r.frames(a)[1] != r.frames(b)[1]);
    const StackId here = capture_b(r); // the same path from this thread: the same caller frame
    CHECK(r.frames(here)[1] == r.frames(b)[1]);
    if (self_a != self_b)
        WARN("the second thread did not get the first one's stack memory: the reuse was not exercised");
}

TEST_CASE("recorder: sampling unwinds every large allocation and 1 in N small ones, bytes scaled", "[recorder]") {
    Recorder r;
    r.set_sampling(1 << 20, 10);
    // 20000 small (4 KiB) allocations and 50 large (2 MiB) ones, freed at once.
    int sampled = 0, large = 0;
    std::uintptr_t p = 0x10000000;
    for (int i = 0; i < 20000; ++i) {
        const StackId id = r.capture(4096);
        sampled += id != 0;
        r.on_alloc(0, p, 4096, 4096, id);
        r.on_free(0, p);
        p += 4096;
    }
    for (int i = 0; i < 50; ++i) {
        const StackId id = r.capture(2 << 20);
        large += id != 0;
        r.on_alloc(0, p, 2 << 20, 2 << 20, id);
        p += 2 << 20;
    }
    CHECK(large == 50);
    // Binomial(20000, 1/10): mean 2000, standard deviation 42; 7 of them either side.
    CHECK(sampled > 1700);
    CHECK(sampled < 2300);
    const auto d = r.collect();
    // The totals stay exact: 50 large blocks live, 100 MiB.
    CHECK(d.live_bytes == 50LL * (2 << 20));
    CHECK(d.live_count == 50);
    CHECK(d.peak_bytes == 50LL * (2 << 20));
    std::int64_t small_total = 0, small_count = 0, large_total = 0, no_site = 0;
    for (const auto& s : d.sites) {
        if (s.id == 0)
            ++no_site;
        if (s.counters.total_bytes > 0 && s.counters.total_bytes / s.counters.total_count == 4096) {
            small_total += s.counters.total_bytes;
            small_count += s.counters.total_count;
        } else {
            large_total += s.counters.total_bytes;
            CHECK(s.counters.live_bytes == 50LL * (2 << 20)); // weight 1: exact
        }
    }
    CHECK(no_site == 0); // the unsampled ones count in no site
    CHECK(large_total == 50LL * (2 << 20));
    CHECK(small_count == 10LL * sampled); // each sampled one stands for 10
    CHECK(small_total == 10LL * 4096 * sampled);
    const auto st = r.capture_stats();
    CHECK(st.sampled_out == static_cast<std::uint64_t>(20000 - sampled));
    CHECK(st.captures == static_cast<std::uint64_t>(sampled + 50));
    CHECK(st.sample_one_in == 10);
}

TEST_CASE("recorder: without sampling capture(bytes) is capture()", "[recorder]") {
    Recorder r;
    std::uintptr_t p = 0x20000000;
    for (int i = 0; i < 100; ++i) {
        const StackId id = r.capture(64);
        REQUIRE(id != 0);
        r.on_alloc(0, p + 64 * i, 64, 64, id);
    }
    const auto d = r.collect();
    REQUIRE(d.sites.size() == 1);
    CHECK(d.sites[0].counters.total_count == 100);
    CHECK(d.sites[0].counters.live_bytes == 6400);
    CHECK(r.capture_stats().sampled_out == 0);
}
