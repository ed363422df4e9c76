// SPDX-License-Identifier: MIT
// expandable_segments:True: pages mapped and unmapped one by one (2 MiB small pool, 20 MiB large
// pool) in one reserved range per stream and pool, and PyTorch's stats for them. Every expected
// value below is worked out by hand from PyTorch's rules (CUDACachingAllocator.cpp: map_block,
// unmap_block, try_allocate_expandable_block, get_free_block, release_blocks).
#include "pool_test_util.hpp"

#include "pool/expandable_segment.hpp"
#include "pool/pool_model.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace pooltest;
using stats::kAll;
using stats::kLargePool;
using stats::kSmallPool;

namespace {

constexpr std::uintptr_t V = SimBackend::kVmmBaseAddress;
constexpr std::int64_t M = static_cast<std::int64_t>(MiB);

std::int64_t reserved(const DevicePool& p, int t = kAll) {
    return p.stats().reserved_bytes[t].current;
}

/// The simulated device agrees with the pool: mapped bytes are the reserved bytes, every page
/// created is mapped, and the pool never made a call the driver would reject.
void check_device(const DevicePool& p, const SimBackend& dev) {
    const auto c = dev.counters();
    CHECK(c.bad_vmm_calls == 0);
    CHECK(static_cast<std::int64_t>(dev.mapped_bytes()) == reserved(p));
    CHECK(static_cast<std::int64_t>(dev.used_bytes()) == reserved(p));
}

} // namespace

TEST_CASE("expandable: the large pool grows by 20 MiB pages and empty_cache unmaps them", "[expandable]") {
    SimBackend dev(std::size_t{8} << 30);
    DevicePool pool(dev, opts("expandable_segments:True"));

    // 5 MiB: a new segment (address space only), one 20 MiB page mapped; the 15 MiB behind the
    // block stay a free block of the segment.
    const auto a = must_malloc(pool, 5 * MiB);
    CHECK(a == V);
    auto s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 20 * M);
    CHECK(s.reserved_bytes[kLargePool].current == 20 * M);
    CHECK(s.reserved_bytes[kSmallPool].current == 0);
    CHECK(s.segment[kAll].current == 0); // PyTorch: mapping pages is not a segment
    CHECK(s.num_device_alloc == 1);
    CHECK(s.inactive_split[kAll].current == 0); // expandable blocks are left out of inactive_split
    CHECK(s.inactive_split_bytes[kAll].current == 0);
    auto c = dev.counters();
    CHECK(c.address_reserves == 1);
    CHECK(c.page_creates == 1);
    CHECK(c.page_maps == 1);
    CHECK(c.set_accesses == 1);
    CHECK(c.allocate_calls == 0); // no plain segment

    // 30 MiB: the free 15 MiB at V+5 MiB plus one more page mapped behind it, merged: 35 MiB, of
    // which the first 30 MiB are handed out.
    const auto b = must_malloc(pool, 30 * MiB);
    CHECK(b == V + 5 * MiB);
    s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 40 * M);
    CHECK(s.num_device_alloc == 2);
    CHECK(s.allocated_bytes[kAll].current == 35 * M);
    CHECK(s.allocation[kAll].current == 2);
    CHECK(s.inactive_split[kAll].current == 0);
    CHECK(dev.counters().page_maps == 2);
    check_device(pool, dev);

    // Free blocks [V, V+5) and [V+35, V+40) hold no whole page: empty_cache gives nothing back.
    REQUIRE(pool.free(a) == kSuccess);
    CHECK(pool.releasable_bytes() == 0);
    pool.empty_cache();
    CHECK(reserved(pool) == 40 * M);
    CHECK(pool.stats().num_device_free == 0);

    // All free: one 40 MiB free block, two whole pages; empty_cache unmaps both (one unmap, counted
    // once as PyTorch's unmap_block does) and, the range being wholly unmapped, frees it.
    REQUIRE(pool.free(b) == kSuccess);
    CHECK(pool.releasable_bytes() == 40 * MiB);
    pool.empty_cache();
    s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 0);
    CHECK(s.reserved_bytes[kAll].peak == 40 * M);
    CHECK(s.num_device_free == 1);
    CHECK(s.segment[kAll].peak == 0);
    c = dev.counters();
    CHECK(c.page_unmaps == 2);
    CHECK(c.page_releases == 2);
    CHECK(c.address_frees == 1);
    CHECK(dev.live_reservations() == 0);
    CHECK(dev.live_pages() == 0);
    CHECK(pool.snapshot().empty());
    check_device(pool, dev);
}

TEST_CASE("expandable: a page in the middle is unmapped and later mapped again first", "[expandable]") {
    SimBackend dev(std::size_t{8} << 30);
    Recorder rec;
    DevicePool pool(dev, opts("expandable_segments:True"), &rec);
    // Small pool, 2 MiB pages: five 1 MiB blocks at V+0..V+4 MiB, three pages mapped.
    std::uintptr_t p[5];
    for (int i = 0; i < 5; ++i) {
        p[i] = must_malloc(pool, MiB);
        CHECK(p[i] == V + static_cast<std::uintptr_t>(i) * MiB);
    }
    CHECK(reserved(pool, kSmallPool) == 6 * M);
    CHECK(pool.stats().num_device_alloc == 3);
    // Freeing the blocks at 2 and 3 MiB frees page [2, 4) as a whole.
    REQUIRE(pool.free(p[2]) == kSuccess);
    REQUIRE(pool.free(p[3]) == kSuccess);
    CHECK(pool.releasable_bytes() == 2 * MiB);
    rec.events.clear();
    pool.empty_cache();
    CHECK(reserved(pool) == 4 * M);
    CHECK(rec.events == std::vector<Event>{{"segment_unmap", V + 2 * MiB, 2 * MiB}});
    check_device(pool, dev);

    // The snapshot shows one segment per mapped range, as PyTorch's does.
    const auto snap = pool.snapshot();
    REQUIRE(snap.size() == 2);
    CHECK(snap[0].address == V);
    CHECK(snap[0].total_size == 2 * MiB);
    CHECK(snap[0].allocated_size == 2 * MiB);
    CHECK(snap[0].is_expandable);
    CHECK(snap[0].is_small);
    CHECK(snap[0].blocks.size() == 2);
    CHECK(snap[1].address == V + 4 * MiB);
    CHECK(snap[1].total_size == 2 * MiB);
    CHECK(snap[1].allocated_size == 1 * MiB);
    REQUIRE(snap[1].blocks.size() == 2);
    CHECK(snap[1].blocks[1].state == BlockState::inactive);
    CHECK(snap[1].blocks[1].address == V + 5 * MiB);

    // Pointer lookups report the mapped range as the segment.
    const Lookup l = pool.lookup(p[4]);
    CHECK(l.in_pool);
    CHECK(l.is_block_start);
    CHECK(l.segment_base == V + 4 * MiB);
    CHECK(l.segment_size == 2 * MiB);
    // A free inside the unmapped hole is an invalid free of our address range, not someone else's.
    CHECK(pool.free(V + 2 * MiB) == kInvalidValue);

    // 1 MiB fits the free block at V+5 MiB; the next 1 MiB maps the hole again (lowest address).
    CHECK(must_malloc(pool, MiB) == V + 5 * MiB);
    rec.events.clear();
    CHECK(must_malloc(pool, MiB) == V + 2 * MiB);
    REQUIRE(rec.events.size() == 2);
    CHECK(rec.events[0] == Event{"segment_map", V + 2 * MiB, 2 * MiB});
    CHECK(reserved(pool) == 6 * M);
    CHECK(pool.snapshot().size() == 1); // the ranges joined again
    check_device(pool, dev);
}

TEST_CASE("expandable: best fit leaves the growable end of a segment for later", "[expandable]") {
    SimBackend dev;
    DevicePool pool(dev, opts("expandable_segments:True"));
    const auto a = must_malloc(pool, MiB);     // [0, 1) of page [0, 2)
    const auto b = must_malloc(pool, MiB / 2); // [1, 1.5); free [1.5, 2) borders the unmapped rest
    CHECK(b == V + MiB);
    REQUIRE(pool.free(a) == kSuccess); // free [0, 1)
    // Best fit by size alone would take the 0.5 MiB block at the end; PyTorch counts the unmapped
    // space behind it as part of its size and takes the 1 MiB block at the start.
    CHECK(must_malloc(pool, MiB / 2) == V);
    CHECK(reserved(pool) == 2 * M);
}

TEST_CASE("expandable: each stream and each pool has its own range", "[expandable]") {
    SimBackend dev(std::size_t{8} << 30);
    DevicePool pool(dev, opts("expandable_segments:True"));
    const auto small0 = must_malloc(pool, 4096, 0);
    const auto large0 = must_malloc(pool, 4 * MiB, 0);
    const auto small1 = must_malloc(pool, 4096, 7);
    CHECK(dev.counters().address_reserves == 3);
    // Address space of 1 1/8 of the device (8 GiB): 9 GiB in 2 MiB pages; 461 pages of 20 MiB.
    CHECK(large0 == V + 9 * (std::uintptr_t{1} << 30));
    CHECK(small1 == large0 + 461 * 20 * MiB);
    CHECK(small0 == V);
    auto s = pool.stats();
    CHECK(s.reserved_bytes[kSmallPool].current == 4 * M);
    CHECK(s.reserved_bytes[kLargePool].current == 20 * M);
    CHECK(s.requested_bytes[kAll].current == 4096 * 2 + 4 * M);
    CHECK(s.allocated_bytes[kAll].current == 8192 + 4 * M);
    check_device(pool, dev);
}

TEST_CASE("expandable: under memory pressure free pages of another stream are unmapped", "[expandable]") {
    // 100 MiB device: address space 112.5 MiB, 6 pages of 20 MiB per range.
    SimBackend dev(100 * MiB);
    DevicePool pool(dev, opts("expandable_segments:True"));
    const auto x = must_malloc(pool, 60 * MiB, 0); // pages 0-2
    const auto y = must_malloc(pool, 30 * MiB, 0); // pages 3-4, free [90, 100)
    CHECK(y == x + 60 * MiB);
    CHECK(reserved(pool) == 100 * M);
    REQUIRE(pool.free(x) == kSuccess);
    // Stream 1 has no range yet: one is reserved, its two pages cannot be had (the device is full),
    // so the pool unmaps the free pages of stream 0 ([0, 60): three pages) and tries again.
    const auto z = must_malloc(pool, 40 * MiB, 1);
    CHECK(z == V + 6 * 20 * MiB); // the second range
    const auto s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 80 * M);
    CHECK(s.num_alloc_retries == 1);
    CHECK(s.num_ooms == 0);
    CHECK(s.num_device_free == 1);
    CHECK(s.num_device_alloc == 3); // x, y, z: one map each
    CHECK(dev.counters().page_unmaps == 3);
    CHECK(dev.counters().address_reserves == 2);
    check_device(pool, dev);
}

TEST_CASE("expandable: running out of pages halfway maps nothing and keeps nothing", "[expandable]") {
    SimBackend dev(std::size_t{8} << 30);
    Recorder rec;
    DevicePool pool(dev, opts("expandable_segments:True"), &rec);
    // 40 MiB needs two pages; the second cuMemCreate fails once: the first page goes back, the
    // retry after release_cached_blocks gets both.
    dev.fail_page_create_after(1, kOutOfMemory);
    const auto a = must_malloc(pool, 40 * MiB);
    CHECK(a == V);
    auto s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 40 * M);
    CHECK(s.num_alloc_retries == 1);
    CHECK(s.num_device_alloc == 1);
    auto c = dev.counters();
    CHECK(c.page_creates == 3); // one given back, two kept
    CHECK(c.page_releases == 1);
    CHECK(c.page_maps == 2);
    CHECK(dev.live_pages() == 2);
    check_device(pool, dev);

    // A request the device cannot hold: out of memory, the pool's OOM report, nothing leaked.
    std::uintptr_t p = 0;
    CHECK(pool.malloc(std::size_t{9} << 30, 0, &p) == kOutOfMemory);
    s = pool.stats();
    CHECK(s.num_ooms == 1);
    REQUIRE(rec.ooms.size() == 1);
    CHECK(rec.ooms[0].reserved == 40 * M);
    CHECK(dev.live_pages() == 2);
    check_device(pool, dev);
}

TEST_CASE("expandable: a driver error while mapping is returned as is, nothing leaked", "[expandable]") {
    SimBackend dev(std::size_t{8} << 30);
    Recorder rec;
    DevicePool pool(dev, opts("expandable_segments:True"), &rec);
    dev.fail_next_page_map(999); // CUDA_ERROR_UNKNOWN
    std::uintptr_t p = 0;
    CHECK(pool.malloc(30 * MiB, 0, &p) == 999);
    CHECK(rec.ooms.empty()); // a device error is not an out-of-memory
    CHECK(dev.live_pages() == 0);
    CHECK(reserved(pool) == 0);
    CHECK(pool.stats().num_device_alloc == 0);
    // The next request works and reuses the range reserved by the failed one.
    CHECK(must_malloc(pool, 30 * MiB) == V);
    CHECK(dev.counters().address_reserves == 1);
    check_device(pool, dev);
}

TEST_CASE("expandable: pages follow the device's granularity", "[expandable]") {
    SimBackend dev(std::size_t{8} << 30);
    dev.set_granularity(8 * MiB); // 2 MiB and 20 MiB are not multiples of it: 8 MiB and 24 MiB pages
    DevicePool pool(dev, opts("expandable_segments:True"));
    must_malloc(pool, 512);
    CHECK(reserved(pool, kSmallPool) == 8 * M);
    must_malloc(pool, 5 * MiB);
    CHECK(reserved(pool, kLargePool) == 24 * M);
    check_device(pool, dev);
}

TEST_CASE("expandable: per_process_memory_fraction limits the mapped bytes", "[expandable]") {
    SimBackend dev(1000 * MiB);
    DevicePool pool(dev, opts("expandable_segments:True,per_process_memory_fraction:0.1"));
    // Allowed: 100 MiB. The fraction check uses PyTorch's allocation size (80 MiB -> 80 MiB).
    const auto a = must_malloc(pool, 80 * MiB);
    std::uintptr_t p = 0;
    CHECK(pool.malloc(30 * MiB, 0, &p) == kOutOfMemory); // 80 + 30 > 100
    CHECK(pool.stats().num_ooms == 1);
    REQUIRE(pool.free(a) == kSuccess);
    CHECK(must_malloc(pool, 30 * MiB) == V); // fits the free mapped block: no mapping needed
    CHECK(reserved(pool) == 80 * M);
}

TEST_CASE("expandable: random sequences keep stats, snapshot and device in agreement", "[expandable]") {
    for (unsigned seed : {1u, 2u, 3u, 4u}) {
        INFO("seed " << seed);
        SimBackend dev(std::size_t{2} << 30);
        DevicePool pool(dev, opts("expandable_segments:True"));
        std::mt19937_64 rng(seed);
        std::vector<std::uintptr_t> live;
        std::uniform_int_distribution<int> op(0, 99);
        std::uniform_int_distribution<std::size_t> small(1, 1 << 20), large((1 << 20) + 1, 64 << 20);
        for (int step = 0; step < 3000; ++step) {
            const int o = op(rng);
            if (o < 55 || live.empty()) {
                const std::size_t size = (o % 2) ? small(rng) : large(rng);
                std::uintptr_t p = 0;
                if (pool.malloc(size, o % 3 == 0 ? 1 : 0, &p) == kSuccess)
                    live.push_back(p);
            } else if (o < 98) {
                const std::size_t i = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
                REQUIRE(pool.free(live[i]) == kSuccess);
                live[i] = live.back();
                live.pop_back();
            } else {
                pool.empty_cache();
            }
            const auto s = pool.stats();
            const auto snap = pool.snapshot();
            std::int64_t total = 0, allocated = 0, requested = 0;
            for (const auto& seg : snap) {
                REQUIRE(seg.is_expandable);
                std::size_t sum = 0;
                for (const auto& b : seg.blocks) {
                    REQUIRE(b.address == seg.address + sum); // blocks tile the mapped range
                    sum += b.size;
                }
                REQUIRE(sum == seg.total_size);
                total += static_cast<std::int64_t>(seg.total_size);
                allocated += static_cast<std::int64_t>(seg.allocated_size);
                requested += static_cast<std::int64_t>(seg.requested_size);
            }
            REQUIRE(s.reserved_bytes[kAll].current == total);
            REQUIRE(s.allocated_bytes[kAll].current == allocated);
            REQUIRE(s.requested_bytes[kAll].current == requested);
            REQUIRE(s.inactive_split_bytes[kAll].current == 0);
            REQUIRE(s.segment[kAll].current == 0);
            REQUIRE(static_cast<std::int64_t>(dev.mapped_bytes()) == total);
            REQUIRE(dev.counters().bad_vmm_calls == 0);
        }
        for (auto p : live)
            REQUIRE(pool.free(p) == kSuccess);
        pool.empty_cache();
        CHECK(reserved(pool) == 0);
        CHECK(dev.live_pages() == 0); // (a range never mapped stays reserved, as in PyTorch)
    }
}

TEST_CASE("expandable: the PyTorch model follows the setting", "[expandable][pool_model]") {
    PoolModel model(parse_alloc_conf("expandable_segments:True", nullptr), 0, std::size_t{8} << 30);
    model.on_alloc(0x1000, 5 * MiB, 0);
    model.on_alloc(0x2000, 30 * MiB, 0);
    auto s = model.stats();
    CHECK(s.reserved_bytes[kAll].current == 40 * M); // as in the first test: two 20 MiB pages
    CHECK(s.segment[kAll].current == 0);
    model.on_free(0x1000);
    model.on_free(0x2000);
    model.empty_cache();
    CHECK(model.stats().reserved_bytes[kAll].current == 0);
    // Without the setting: one 20 MiB segment and one of 30 MiB.
    PoolModel plain(AllocConf{}, 0, std::size_t{8} << 30);
    plain.on_alloc(0x1000, 5 * MiB, 0);
    plain.on_alloc(0x2000, 30 * MiB, 0);
    CHECK(plain.stats().reserved_bytes[kAll].current == 50 * M);
    CHECK(plain.stats().segment[kAll].current == 2);
}

TEST_CASE("expandable segment: pages of one range, mapped all or nothing", "[expandable]") {
    SimBackend dev(64 * MiB);
    std::unique_ptr<ExpandableSegment> es;
    REQUIRE(ExpandableSegment::create(dev, 2 * MiB, 100, &es) == kSuccess);
    CHECK(es->size() == 200 * MiB);
    std::size_t mapped = 0;
    REQUIRE(es->map(es->base(), 3 * MiB, &mapped) == kSuccess); // rounds up to two pages
    CHECK(mapped == 4 * MiB);
    CHECK(es->mapped_bytes() == 4 * MiB);
    CHECK(es->map(es->base() + 2 * MiB, 2 * MiB, &mapped) == kInvalidValue); // already mapped
    // 62 MiB would need 31 pages; 30 fit: nothing is mapped and nothing kept.
    CHECK(es->map(es->base() + 4 * MiB, 62 * MiB, &mapped) == kOutOfMemory);
    CHECK(dev.live_pages() == 2);
    std::uintptr_t first = 0;
    std::size_t unmapped = 0;
    es->unmap(es->base() + 1, 4 * MiB - 1, &first, &unmapped); // only the second page is whole
    CHECK(first == es->base() + 2 * MiB);
    CHECK(unmapped == 2 * MiB);
    es->release();
    CHECK(dev.live_pages() == 0);
    CHECK(dev.live_reservations() == 0);
    CHECK(dev.counters().bad_vmm_calls == 0);
}

TEST_CASE("expandable: pages mapped for a request carry its site to the listener", "[expandable]") {
    SimBackend dev(std::size_t{8} << 30);
    Recorder rec;
    DevicePool pool(dev, opts("expandable_segments:True"), &rec);
    std::uintptr_t a = 0, b = 0;
    REQUIRE(pool.malloc(5 * MiB, 0, &a, 3) == kSuccess); // maps one 20 MiB page
    // 30 MiB: the 15 MiB free behind the first block and one more page (15 MiB of it).
    REQUIRE(pool.malloc(30 * MiB, 0, &b, 4) == kSuccess);
    CHECK(rec.sites == std::vector<RequestSite>{3, 3, 4, 4});
    std::vector<std::string> what;
    for (const Event& e : rec.events)
        what.push_back(e.what);
    CHECK(what == std::vector<std::string>{"segment_map", "alloc", "segment_map", "alloc"});
}
