// SPDX-License-Identifier: MIT
// DevicePool scenarios with addresses and stats computed by hand from the PyTorch rules.
#include "pool_test_util.hpp"

#include <catch2/catch.hpp>

using namespace pooltest;
using stats::kAll;
using stats::kLargePool;
using stats::kSmallPool;

TEST_CASE("small pool: split, best fit, merge, inactive_split, empty_cache", "[pool]") {
    SimBackend dev;
    Recorder rec;
    DevicePool pool(dev, opts(), &rec);

    // 1000 -> 1024 B, small pool, one 2 MiB segment at B, split (remainder 2096128 >= 512).
    const auto p1 = must_malloc(pool, 1000);
    CHECK(p1 == B);
    auto s = pool.stats();
    CHECK(s.segment[kSmallPool].current == 1);
    CHECK(s.reserved_bytes[kAll].current == 2097152);
    CHECK(s.allocated_bytes[kSmallPool].current == 1024);
    CHECK(s.requested_bytes[kAll].current == 1000);
    CHECK(s.inactive_split[kSmallPool].current == 1);
    CHECK(s.inactive_split_bytes[kSmallPool].current == 2097152 - 1024);
    CHECK(s.num_device_alloc == 1);
    CHECK(s.segment[kLargePool].current == 0);

    // 3000 -> 3072 B carved from the remainder at B + 1024; the split remainder shrinks by 3072.
    const auto p2 = must_malloc(pool, 3000);
    CHECK(p2 == B + 1024);
    s = pool.stats();
    CHECK(s.inactive_split[kAll].current == 1);
    CHECK(s.inactive_split_bytes[kAll].current == 2096128 - 3072); // 2093056
    CHECK(s.allocated_bytes[kAll].current == 4096);
    CHECK(s.num_device_alloc == 1);

    // Free p1: neighbour p2 is in use, no merge; a second inactive split block of 1024.
    REQUIRE(pool.free(p1) == kSuccess);
    s = pool.stats();
    CHECK(s.inactive_split[kAll].current == 2);
    CHECK(s.inactive_split_bytes[kAll].current == 2093056 + 1024);
    CHECK(s.allocation[kAll].current == 1);
    CHECK(s.active_bytes[kAll].current == 3072);
    CHECK(s.requested_bytes[kAll].current == 3000);

    // 512: best fit is the 1024 block at B (not the big tail); split leaves 512 at B + 512.
    const auto p3 = must_malloc(pool, 512);
    CHECK(p3 == B);
    s = pool.stats();
    CHECK(s.inactive_split[kAll].current == 2);
    CHECK(s.inactive_split_bytes[kAll].current == 2093056 + 512);

    auto snap = pool.snapshot();
    REQUIRE(snap.size() == 1);
    REQUIRE(snap[0].blocks.size() == 4);
    CHECK(snap[0].blocks[0].address == B);
    CHECK(snap[0].blocks[0].state == BlockState::active_allocated);
    CHECK(snap[0].blocks[1].address == B + 512);
    CHECK(snap[0].blocks[1].size == 512);
    CHECK(snap[0].blocks[1].state == BlockState::inactive);
    CHECK(snap[0].blocks[2].address == B + 1024);
    CHECK(snap[0].blocks[2].size == 3072);
    CHECK(snap[0].blocks[3].address == B + 4096);
    CHECK(snap[0].blocks[3].size == 2093056);
    CHECK(snap[0].allocated_size == 512 + 3072);
    CHECK(snap[0].requested_size == 512 + 3000);
    CHECK(snap[0].is_small);

    // Free p2: absorbs both free neighbours (-2 blocks, -(512 + 2093056)); still split (p3 in use):
    // +1 block, +(512 + 3072 + 2093056) = 2096640. Net: 1 block, 2096640 bytes.
    REQUIRE(pool.free(p2) == kSuccess);
    s = pool.stats();
    CHECK(s.inactive_split[kAll].current == 1);
    CHECK(s.inactive_split_bytes[kAll].current == 2096640);
    CHECK(s.reserved_bytes[kAll].current == s.active_bytes[kAll].current + 2096640);
    CHECK(pool.releasable_bytes() == 0);

    // Free p3: the whole segment is one free block again.
    REQUIRE(pool.free(p3) == kSuccess);
    s = pool.stats();
    CHECK(s.inactive_split[kAll].current == 0);
    CHECK(s.inactive_split_bytes[kAll].current == 0);
    CHECK(s.active[kAll].current == 0);
    CHECK(pool.releasable_bytes() == 2097152);
    snap = pool.snapshot();
    REQUIRE(snap[0].blocks.size() == 1);

    pool.empty_cache();
    s = pool.stats();
    CHECK(s.segment[kAll].current == 0);
    CHECK(s.reserved_bytes[kAll].current == 0);
    CHECK(s.reserved_bytes[kAll].peak == 2097152);
    CHECK(s.num_device_free == 1);
    CHECK(s.num_sync_all_streams == 1);
    CHECK(dev.live_segments() == 0);
    CHECK(dev.counters().bad_releases == 0);

    // The trace: addresses and block sizes in emission order.
    const std::vector<Event> expected = {
        {"segment_alloc", B, 2097152},      {"alloc", B, 1024},
        {"alloc", B + 1024, 3072},          {"free_requested", B, 1024},
        {"free_completed", B, 1024},        {"alloc", B, 512},
        {"free_requested", B + 1024, 3072}, {"free_completed", B + 1024, 3072},
        {"free_requested", B, 512},         {"free_completed", B, 512},
        {"segment_free", B, 2097152},
    };
    CHECK(rec.events == expected);
}

TEST_CASE("large pool: 20 MiB segments, remainder <= 1 MiB is not split", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts());
    // 5 MiB < 10 MiB -> a 20 MiB segment; remainder 15 MiB > 1 MiB -> split.
    const auto a = must_malloc(pool, 5 * MiB);
    CHECK(a == B);
    // 14.5 MiB takes the 15 MiB tail whole: 0.5 MiB would remain, not > 1 MiB.
    const auto b = must_malloc(pool, 14 * MiB + MiB / 2);
    CHECK(b == B + 5 * MiB);
    auto s = pool.stats();
    CHECK(s.segment[kLargePool].current == 1);
    CHECK(s.allocated_bytes[kLargePool].current == 20 * MiB);
    CHECK(s.requested_bytes[kLargePool].current == 19 * MiB + MiB / 2);
    CHECK(s.inactive_split[kLargePool].current == 0);
    CHECK(s.inactive_split_bytes[kLargePool].current == 0);

    // 19 MiB: >= 10 MiB -> rounded up to 2 MiB: 20 MiB segment at B + 20 MiB; remainder exactly
    // 1 MiB is not > kSmallSize, so the whole 20 MiB block is handed out.
    const auto c = must_malloc(pool, 19 * MiB);
    CHECK(c == B + 20 * MiB);
    s = pool.stats();
    CHECK(s.allocated_bytes[kLargePool].current == 40 * MiB);
    CHECK(s.reserved_bytes[kLargePool].current == 40 * MiB);

    // 1 MiB + 1 -> 1 MiB + 512 goes to the large pool (> kSmallSize): another 20 MiB segment.
    const auto d = must_malloc(pool, MiB + 1);
    CHECK(d == B + 40 * MiB);
    s = pool.stats();
    CHECK(s.segment[kLargePool].current == 3);
    CHECK(s.inactive_split_bytes[kLargePool].current == 20 * MiB - (MiB + 512));
    CHECK(s.segment[kSmallPool].current == 0);
}

TEST_CASE("streams never share free blocks", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts());
    const auto a = must_malloc(pool, 4096, 1);
    REQUIRE(pool.free(a) == kSuccess);
    const auto b = must_malloc(pool, 4096, 2);
    CHECK(b == B + 2 * MiB); // stream 2 gets its own segment
    const auto c = must_malloc(pool, 4096, 1);
    CHECK(c == B); // stream 1 reuses its cached block
    auto snap = pool.snapshot();
    REQUIRE(snap.size() == 2);
    CHECK(snap[0].stream == 1);
    CHECK(snap[1].stream == 2);
}

TEST_CASE("oversize blocks: never split, reuse window, stats", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts("max_split_size_mb:40"));
    CHECK(pool.stats().max_split_size == 40 * static_cast<std::int64_t>(MiB));
    // 50 MiB >= 40 MiB: oversize segment of 50 MiB, handed out whole.
    const auto a = must_malloc(pool, 50 * MiB);
    auto s = pool.stats();
    CHECK(s.oversize_segments.current == 1);
    CHECK(s.oversize_allocations.current == 1);
    REQUIRE(pool.free(a) == kSuccess);
    s = pool.stats();
    CHECK(s.oversize_allocations.current == 0);
    CHECK(s.oversize_allocations.freed == 1);
    CHECK(s.oversize_segments.current == 1);

    // 30 MiB is not oversize and must not take the 50 MiB block: new 30 MiB segment.
    const auto b = must_malloc(pool, 30 * MiB);
    CHECK(b == B + 50 * MiB);
    CHECK(pool.stats().segment[kAll].current == 2);
    CHECK(pool.stats().oversize_segments.current == 1);

    // 45 MiB is oversize: 50 < 45 + 20, so it takes the cached 50 MiB block, unsplit.
    const auto c = must_malloc(pool, 45 * MiB);
    CHECK(c == B);
    s = pool.stats();
    CHECK(s.segment[kAll].current == 2);
    CHECK(s.allocated_bytes[kAll].current == 80 * MiB);
    CHECK(s.requested_bytes[kAll].current == 75 * MiB);
    CHECK(s.oversize_allocations.current == 1);
    CHECK(s.inactive_split[kAll].current == 0);

    // A cached 100 MiB block is too big for 50 MiB (100 >= 50 + 20): new segment.
    const auto d = must_malloc(pool, 100 * MiB);
    REQUIRE(pool.free(d) == kSuccess);
    const auto e = must_malloc(pool, 50 * MiB);
    CHECK(e != d);
    CHECK(pool.stats().segment[kAll].current == 4);
    CHECK(pool.stats().oversize_segments.current == 3); // 50, 100, 50 (the 30 MiB is not)
}

TEST_CASE("release_available_cached_blocks frees an oversize block before retrying", "[pool]") {
    SimBackend dev(150 * MiB);
    DevicePool pool(dev, opts("max_split_size_mb:40"));
    const auto a = must_malloc(pool, 100 * MiB);
    REQUIRE(pool.free(a) == kSuccess);
    // 60 MiB: cached 100 >= 60 + 20 -> no reuse; device has 50 MiB left -> allocate fails;
    // release_available_cached_blocks frees the 100 MiB block; the second attempt succeeds.
    const auto b = must_malloc(pool, 60 * MiB);
    CHECK(b == B + 100 * MiB);
    const auto s = pool.stats();
    CHECK(s.num_alloc_retries == 0); // only the attempt after release_cached_blocks counts
    CHECK(s.num_sync_all_streams == 0);
    CHECK(s.num_device_free == 1);
    CHECK(s.num_ooms == 0);
    CHECK(s.segment[kAll].current == 1);
    CHECK(s.reserved_bytes[kAll].current == 60 * MiB);
    CHECK(dev.counters().allocate_calls == 3);
}

TEST_CASE("release_cached_blocks + retry, then OOM with its info", "[pool]") {
    SimBackend dev(40 * MiB);
    Recorder rec;
    DevicePool pool(dev, opts(), &rec);
    const auto a = must_malloc(pool, 1000);     // 2 MiB small segment
    const auto b = must_malloc(pool, 30 * MiB); // 30 MiB large segment; 32 MiB used
    REQUIRE(pool.free(a) == kSuccess);
    REQUIRE(pool.free(b) == kSuccess);
    // 12 MiB on stream 7: nothing cached for that stream; 32 + 12 > 40 -> fails; max_split_size is
    // unlimited so release_available_cached_blocks does nothing; release_cached_blocks frees both
    // cached segments (large first) and the retry succeeds.
    const auto c = must_malloc(pool, 12 * MiB, 7);
    CHECK(c == B + 32 * MiB);
    auto s = pool.stats();
    CHECK(s.num_alloc_retries == 1);
    CHECK(s.num_sync_all_streams == 1);
    CHECK(s.num_device_free == 2);
    CHECK(s.num_ooms == 0);
    CHECK(s.reserved_bytes[kAll].current == 12 * MiB);

    // 30 MiB more cannot fit (12 + 30 > 40) and nothing is cached: OOM after a counted retry.
    std::uintptr_t p = 0;
    CHECK(pool.malloc(30 * MiB, 7, &p) == kOutOfMemory);
    s = pool.stats();
    CHECK(s.num_alloc_retries == 2);
    CHECK(s.num_sync_all_streams == 2);
    CHECK(s.num_ooms == 1);
    REQUIRE(rec.ooms.size() == 1);
    const OomInfo& o = rec.ooms[0];
    CHECK(o.requested == 30 * MiB);
    CHECK(o.rounded == 30 * MiB);
    CHECK(o.allocation_size == 30 * MiB);
    CHECK(o.device_free == 28 * MiB);
    CHECK(o.device_total == 40 * MiB);
    CHECK(o.allocated == static_cast<std::int64_t>(12 * MiB));
    CHECK(o.reserved == static_cast<std::int64_t>(12 * MiB));
    CHECK(o.allowed == 0);
    CHECK(o.status == kOutOfMemory);
    const std::vector<Event> segs_freed = {{"segment_free", B + 2 * MiB, 30 * MiB}, {"segment_free", B, 2 * MiB}};
    std::vector<Event> got;
    for (const auto& e : rec.events)
        if (e.what == "segment_free")
            got.push_back(e);
    CHECK(got == segs_freed);
}

TEST_CASE("a device error other than OOM is returned as is, without the OOM path", "[pool]") {
    SimBackend dev;
    Recorder rec;
    DevicePool pool(dev, opts(), &rec);
    dev.fail_next_allocate(999);
    std::uintptr_t p = 0;
    CHECK(pool.malloc(4096, 0, &p) == 999);
    CHECK(pool.stats().num_ooms == 0);
    CHECK(rec.ooms.empty());
    CHECK(pool.malloc(std::size_t{1} << 61, 0, &p) == kOutOfMemory); // > 1 EiB: refused up front
    CHECK(pool.stats().num_ooms == 0);
    CHECK(pool.malloc(4096, 0, nullptr) == kInvalidValue);
}

TEST_CASE("per_process_memory_fraction refuses without asking the device", "[pool]") {
    SimBackend dev(100 * MiB);
    Recorder rec;
    DevicePool pool(dev, opts("per_process_memory_fraction:0.5"), &rec); // allowed 50 MiB
    must_malloc(pool, 30 * MiB);
    std::uintptr_t p = 0;
    CHECK(pool.malloc(30 * MiB, 0, &p) == kOutOfMemory); // 30 + 30 > 50
    CHECK(dev.counters().allocate_calls == 1);
    const auto s = pool.stats();
    CHECK(s.num_ooms == 1);
    CHECK(s.num_alloc_retries == 1);
    REQUIRE(rec.ooms.size() == 1);
    CHECK(rec.ooms[0].allowed == 50 * MiB);
    CHECK(rec.ooms[0].device_free == 70 * MiB);
    must_malloc(pool, 20 * MiB); // 30 + 20 == 50 is allowed
}

TEST_CASE("garbage collection frees aged unsplit large blocks, only with a fraction", "[pool]") {
    // Clock = large-pool get_free_block calls (counted only when GC is on).
    // a: clock 1 (miss) -> seg A at B; b: clock 2 -> seg at B+20; free a (age base 2);
    // t on stream 5: clock 3 -> 12 MiB seg at B+40, reserved 52 MiB; free b, t (base 3).
    // c = 40 MiB: clock 4, miss; reserved 52 > 0.5 * 100 -> target 2 MiB. Ages a 2, b 1, t 1,
    // average 4/3: only a (age 2) goes; 20 MiB >= target stops the loop.
    auto run = [](const char* conf, SimBackend& dev) {
        DevicePool pool(dev, opts(conf));
        const auto a = must_malloc(pool, 20 * MiB);
        const auto b = must_malloc(pool, 20 * MiB);
        REQUIRE(pool.free(a) == kSuccess);
        const auto t = must_malloc(pool, 12 * MiB, 5);
        REQUIRE(pool.free(b) == kSuccess);
        REQUIRE(pool.free(t) == kSuccess);
        must_malloc(pool, 40 * MiB);
        return std::make_pair(pool.stats(), pool.snapshot());
    };
    SimBackend dev1(100 * MiB);
    const auto [s, snap] = run("per_process_memory_fraction:1.0,garbage_collection_threshold:0.5", dev1);
    CHECK(s.num_device_free == 1);
    CHECK(s.num_sync_all_streams == 0);
    REQUIRE(snap.size() == 3);
    CHECK(snap[0].address == B + 20 * MiB);
    CHECK(snap[1].address == B + 40 * MiB);
    CHECK(snap[2].address == B + 52 * MiB);
    CHECK(s.reserved_bytes[kAll].current == 72 * MiB);

    SimBackend dev2(100 * MiB);
    const auto [s2, snap2] = run("garbage_collection_threshold:0.5", dev2); // no fraction: no GC
    CHECK(s2.num_device_free == 0);
    CHECK(snap2.size() == 4);
}

TEST_CASE("deferred frees wait for their fence", "[pool][defer]") {
    SimBackend dev;
    dev.set_fences_busy(true);
    DevicePool pool(dev, opts("", true));
    const auto p = must_malloc(pool, 1000);
    REQUIRE(pool.free(p) == kSuccess);
    auto s = pool.stats();
    // free(): the program's figures drop at once (PyTorch's free without record_stream); the
    // block waits for its fence in the pool's own figures.
    CHECK(s.allocation[kAll].current == 0);
    CHECK(s.allocated_bytes[kAll].current == 0);
    CHECK(s.active[kAll].current == 0);
    CHECK(s.active_bytes[kAll].current == 0);
    CHECK(s.requested_bytes[kAll].current == 0);
    CHECK(pool.pending().bytes.current == 1024);
    CHECK(pool.pending().blocks.current == 1);
    CHECK(pool.snapshot()[0].blocks[0].state == BlockState::active_pending_free);
    CHECK(pool.snapshot()[0].active_size == 1024); // PyTorch's snapshot counts active_pending_free there

    // Fewer than fence_step() bytes (2 MiB here) wait: the free records no fence (no device call).
    CHECK(dev.counters().fence_records == 0);
    // A hit elsewhere needs no fence and no poll: the pending block is skipped.
    const auto q = must_malloc(pool, 1000);
    CHECK(q == B + 1024);
    CHECK(dev.counters().fence_records == 0);
    CHECK(pool.counters().fence_polls == 0);

    CHECK(pool.free(p) == kInvalidValue); // double free of a pending block
    CHECK(pool.invalid_frees() == 1);
    REQUIRE(pool.free(q) == kSuccess);

    // A miss (other stream) fences p and q together and polls (busy); no pending block is on
    // stream 9, so it does not wait -> new segment.
    const auto r = must_malloc(pool, 1000, 9);
    CHECK(r == B + 2 * MiB);
    CHECK(dev.counters().fence_records == 1);
    CHECK(dev.counters().bounded_waits == 0);
    CHECK(pool.counters().misses == 2); // p's first malloc (empty pool) and r
    CHECK(pool.stats().active[kAll].current == 1);
    CHECK(pool.pending().blocks.current == 2);
    CHECK(pool.pending().bytes.peak == 2048);

    // A busy fence is polled by later mallocs but retires nothing.
    must_malloc(pool, 1000, 9);
    CHECK(pool.stats().active[kAll].current == 2);

    dev.complete_fences();
    pool.process_fences();
    s = pool.stats();
    CHECK(s.active[kAll].current == 2);
    CHECK(s.requested_bytes[kAll].current == 2000);
    CHECK(pool.pending().blocks.current == 0);
    CHECK(pool.pending().blocks.peak == 2);
    CHECK(s.inactive_split[kAll].current == 1); // segment 1 whole again, segment 2 split
    CHECK(pool.releasable_bytes() == 2 * MiB);
    CHECK(dev.counters().fence_releases == 1);
}

TEST_CASE("a miss fences pending blocks and reuses them when the fence is done", "[pool][defer]") {
    SimBackend dev; // fences complete at once
    DevicePool pool(dev, opts("", true));
    const auto p = must_malloc(pool, MiB); // 1 MiB small block, 1 MiB remainder
    const auto q = must_malloc(pool, MiB); // takes the remainder whole
    CHECK(q == B + MiB);
    REQUIRE(pool.free(p) == kSuccess); // 1 MiB waits: below the 2 MiB step, no fence yet
    REQUIRE(pool.free(q) == kSuccess); // 2 MiB wait: one fence for both
    CHECK(dev.counters().fence_records == 1);
    // Nothing free: the miss polls the fence (done); p and q become free and merge into the
    // 2 MiB segment; the retry splits it at B without a new segment or a new fence.
    const auto r = must_malloc(pool, MiB);
    CHECK(r == B);
    CHECK(dev.counters().fence_records == 1);
    CHECK(pool.stats().num_device_alloc == 1);
    CHECK(pool.stats().active[kAll].current == 1);
    CHECK(pool.pending().blocks.current == 0);
    CHECK(pool.counters().misses == 1); // only p's first malloc, into the empty pool
}

TEST_CASE("empty_cache waits for fences; unfenceable blocks stay pending", "[pool][defer]") {
    SimBackend dev;
    dev.set_fences_busy(true);
    DevicePool pool(dev, opts("", true));
    const auto p = must_malloc(pool, 1000);
    dev.set_fence_record_allowed(false); // e.g. a stream capture is running
    REQUIRE(pool.free(p) == kSuccess);   // the free cannot fence p
    pool.empty_cache();
    CHECK(pool.stats().segment[kAll].current == 1);
    CHECK(pool.pending().blocks.current == 1);
    CHECK(pool.stats().num_sync_all_streams == 1);

    dev.set_fence_record_allowed(true);
    pool.empty_cache(); // fences p, waits (the simulated device then finishes it), releases
    auto s = pool.stats();
    CHECK(dev.counters().fence_waits == 1);
    CHECK(pool.pending().blocks.current == 0);
    CHECK(s.segment[kAll].current == 0);
    CHECK(s.num_sync_all_streams == 2);
    CHECK(dev.live_segments() == 0);
}

TEST_CASE("fence_wait refused: blocks stay pending, segment kept", "[pool][defer]") {
    SimBackend dev;
    dev.set_fences_busy(true);
    dev.set_fence_wait_allowed(false);
    DevicePool pool(dev, opts("", true));
    REQUIRE(pool.free(must_malloc(pool, 1000)) == kSuccess);
    pool.empty_cache();
    CHECK(pool.pending().blocks.current == 1);
    CHECK(pool.stats().segment[kAll].current == 1);
    dev.complete_fences();
    pool.process_fences();
    CHECK(pool.pending().blocks.current == 0);
}

TEST_CASE("interior, double and foreign frees; lookup", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts());
    const auto p = must_malloc(pool, 1000);
    CHECK(pool.free(p + 512) == kInvalidValue);  // inside p
    CHECK(pool.free(B + 4096) == kInvalidValue); // inside the cached remainder
    CHECK(pool.free(0x1234) == kNotOwned);
    CHECK(pool.free(0) == kNotOwned);
    CHECK(pool.free(B + 2 * MiB) == kNotOwned); // one past the segment
    CHECK(pool.invalid_frees() == 2);
    CHECK(pool.stats().allocation[kAll].current == 1); // bad frees change nothing

    Lookup l = pool.lookup(p);
    CHECK(l.in_pool);
    CHECK(l.is_block_start);
    CHECK(l.segment_base == B);
    CHECK(l.segment_size == 2 * MiB);
    CHECK(l.block_size == 1024);
    l = pool.lookup(p + 700);
    CHECK(l.in_pool);
    CHECK_FALSE(l.is_block_start);
    CHECK(l.block_address == B);
    l = pool.lookup(B + 5000);
    CHECK(l.in_pool);
    CHECK(l.block_address == B + 1024);
    CHECK_FALSE(pool.lookup(B + 2 * MiB).in_pool);

    REQUIRE(pool.free(p) == kSuccess);
    CHECK(pool.free(p) == kInvalidValue); // double free: still inside a cached segment
    CHECK(pool.invalid_frees() == 3);
    CHECK_FALSE(pool.lookup(p).is_block_start);
    pool.empty_cache();
    CHECK(pool.free(p) == kNotOwned); // the segment is gone
    CHECK(pool.stats().allocation[kAll].freed == 1);
}

TEST_CASE("passthrough: one 512-rounded segment per malloc, released at free", "[pool]") {
    SimBackend dev;
    Recorder rec;
    DevicePool pool(dev, opts("", true, Mode::passthrough), &rec);
    const auto a = must_malloc(pool, 1000);
    const auto z = must_malloc(pool, 0);
    const auto c = must_malloc(pool, 3 * MiB + 1);
    CHECK(dev.used_bytes() == 1024 + 512 + 3 * MiB + 512);
    auto s = pool.stats();
    CHECK(s.segment[kAll].current == 3);
    CHECK(s.segment[kSmallPool].current == 2);
    CHECK(s.allocation[kAll].current == 3);
    CHECK(s.reserved_bytes[kAll].current == static_cast<std::int64_t>(1024 + 512 + 3 * MiB + 512));
    CHECK(s.allocated_bytes[kAll].current == s.reserved_bytes[kAll].current);
    CHECK(s.requested_bytes[kAll].current == static_cast<std::int64_t>(1000 + 0 + 3 * MiB + 1));
    CHECK(s.inactive_split[kAll].current == 0);
    REQUIRE(pool.free(a) == kSuccess);
    CHECK(dev.live_segments() == 2); // released at once despite defer_frees
    CHECK(pool.free(a) == kNotOwned);
    REQUIRE(pool.free(z) == kSuccess);
    REQUIRE(pool.free(c) == kSuccess);
    s = pool.stats();
    CHECK(s.segment[kAll].current == 0);
    CHECK(s.reserved_bytes[kAll].current == 0);
    CHECK(s.num_device_alloc == 3);
    CHECK(s.num_device_free == 3);
    CHECK(dev.used_bytes() == 0);
    CHECK(rec.events.front() == Event{"segment_alloc", a, 1024});
    CHECK(rec.events[1] == Event{"alloc", a, 1024});
    CHECK(rec.events.back() == Event{"segment_free", c, 3 * MiB + 512});
}

TEST_CASE("reset_peak_stats and reset_accumulated_stats", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts());
    const auto a = must_malloc(pool, 4096);
    const auto b = must_malloc(pool, 4096);
    const auto c = must_malloc(pool, 4096);
    REQUIRE(pool.free(a) == kSuccess);
    REQUIRE(pool.free(b) == kSuccess);
    auto s = pool.stats();
    CHECK(s.allocated_bytes[kAll].peak == 3 * 4096);
    CHECK(s.allocated_bytes[kAll].current == 4096);
    pool.reset_peak_stats();
    s = pool.stats();
    CHECK(s.allocated_bytes[kAll].peak == 4096);
    CHECK(s.allocated_bytes[kAll].allocated == 3 * 4096);
    pool.reset_accumulated_stats();
    s = pool.stats();
    CHECK(s.allocated_bytes[kAll].allocated == 0);
    CHECK(s.allocated_bytes[kAll].freed == 0);
    CHECK(s.allocated_bytes[kAll].current == 4096);
    CHECK(s.num_device_alloc == 0);
    CHECK(s.reserved_bytes[kAll].current == 2 * MiB);
    REQUIRE(pool.free(c) == kSuccess);
    CHECK(pool.stats().allocated_bytes[kAll].freed == 4096);
}

TEST_CASE("drop_all forgets everything without calling the backend", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts("", true));
    const auto a = must_malloc(pool, 4096);
    must_malloc(pool, 30 * MiB);
    REQUIRE(pool.free(a) == kSuccess);
    const auto before = dev.counters();
    pool.drop_all();
    const auto after = dev.counters();
    CHECK(after.release_calls == before.release_calls);
    CHECK(after.fence_records == before.fence_records);
    const auto s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 0);
    CHECK(s.active[kAll].current == 0);
    CHECK(s.reserved_bytes[kAll].peak == static_cast<std::int64_t>(32 * MiB));
    CHECK(s.num_device_alloc == 2);
    // What the context took with it counts as freed: allocated - freed = current (0) everywhere.
    CHECK(s.allocation[kAll].allocated == 2);
    CHECK(s.allocation[kAll].freed == 2);
    CHECK(s.segment[kAll].freed == 2);
    CHECK(s.reserved_bytes[kAll].freed == static_cast<std::int64_t>(32 * MiB));
    CHECK(pool.snapshot().empty());
    CHECK(pool.free(a) == kNotOwned);
    // The pool is usable again afterwards.
    const auto n = must_malloc(pool, 4096);
    CHECK(n == B + 32 * MiB); // the simulated device never reuses addresses
}

TEST_CASE("reserved peak moment: fragmentation measured at one instant", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts());
    // 3 MiB: a 20 MiB large segment, split; at that moment 17 MiB of it is free inside a split
    // segment.
    const auto a = must_malloc(pool, 3 * MiB);
    auto m = pool.reserved_peak();
    CHECK(m.reserved == static_cast<std::int64_t>(20 * MiB));
    CHECK(m.allocated == static_cast<std::int64_t>(3 * MiB));
    CHECK(m.inactive_split_bytes == static_cast<std::int64_t>(17 * MiB));
    // 4 MiB more from the same segment: reserved does not grow, the moment stays.
    const auto b = must_malloc(pool, 4 * MiB);
    CHECK(pool.reserved_peak().allocated == static_cast<std::int64_t>(3 * MiB));
    REQUIRE(pool.free(a) == kSuccess);
    REQUIRE(pool.free(b) == kSuccess);
    // 25 MiB: its own 26 MiB segment, and the 1 MiB remainder is not > 1 MiB, so the block is
    // not split and counts whole (26 MiB allocated); the 20 MiB segment is whole again, so nothing
    // free sits in a split segment. Peak inactive_split_bytes (17 MiB) is from another moment.
    const auto c = must_malloc(pool, 25 * MiB);
    m = pool.reserved_peak();
    CHECK(m.reserved == static_cast<std::int64_t>(46 * MiB));
    CHECK(m.allocated == static_cast<std::int64_t>(26 * MiB));
    CHECK(m.inactive_split_bytes == 0);
    CHECK(pool.stats().inactive_split_bytes[kAll].peak == static_cast<std::int64_t>(17 * MiB));
    // reset_peak_stats moves the moment to now, as it does the peaks.
    REQUIRE(pool.free(c) == kSuccess);
    pool.empty_cache();
    pool.reset_peak_stats();
    m = pool.reserved_peak();
    CHECK(m.reserved == 0);
    CHECK(m.allocated == 0);
    (void)must_malloc(pool, 1000); // a 2 MiB small segment: a new peak since the reset
    m = pool.reserved_peak();
    CHECK(m.reserved == static_cast<std::int64_t>(2 * MiB));
    CHECK(m.allocated == 1024);
    CHECK(m.inactive_split_bytes == static_cast<std::int64_t>(2 * MiB - 1024));
}

TEST_CASE("a request's site reaches the listener with each event it causes, and only those", "[pool]") {
    SimBackend dev(40 * MiB);
    Recorder rec;
    DevicePool pool(dev, opts(), &rec);
    std::uintptr_t a = 0, b = 0, c = 0, p = 0;
    // A miss: the new 2 MiB segment and the block are the request's; a hit: only the block.
    REQUIRE(pool.malloc(1000, 0, &a, 7) == kSuccess);
    REQUIRE(pool.malloc(1000, 0, &b, 8) == kSuccess);
    REQUIRE(pool.free(a) == kSuccess);
    // A private pool's request, and one made without a site.
    REQUIRE(pool.malloc(1000, 0, &c, PoolId{1, 1}, 9) == kSuccess);
    REQUIRE(pool.malloc(1000, 0, &a) == kSuccess);
    // Out of memory: 50 MiB never fits a 40 MiB device; >= 1 EiB is refused before the policy.
    CHECK(pool.malloc(50 * MiB, 0, &p, 10) == kOutOfMemory);
    CHECK(pool.malloc(std::size_t{1} << 61, 0, &p, 11) == kOutOfMemory);
    CHECK(rec.sites == std::vector<RequestSite>{7, 7, 8, 9, 9, 0, 10, 11});
    std::vector<std::string> what;
    for (const Event& e : rec.events)
        if (e.what == "alloc" || e.what == "segment_alloc")
            what.push_back(e.what);
    CHECK(what == std::vector<std::string>{"segment_alloc", "alloc", "alloc", "segment_alloc", "alloc", "alloc"});
    CHECK(rec.ooms.size() == 2);

    // Without caching the segment is the block: both carry the site.
    Recorder rec2;
    DevicePool plain(dev, opts("", false, Mode::passthrough), &rec2);
    REQUIRE(plain.malloc(4096, 0, &p, 12) == kSuccess);
    CHECK(rec2.sites == std::vector<RequestSite>{12, 12});
}
