// SPDX-License-Identifier: MIT
// Random operation sequences (fixed seeds): the stats must agree with the pool's own snapshot and
// with the simulated device after every step, and reserved = active + inactive_split + releasable.
#include "pool_test_util.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace pooltest;
using stats::kAll;
using stats::kLargePool;
using stats::kSmallPool;

namespace {

void check_invariants(DevicePool& pool, SimBackend& dev) {
    const auto s = pool.stats();
    const auto snap = pool.snapshot();
    std::int64_t reserved[3] = {}, allocated[3] = {}, active[3] = {}, requested[3] = {};
    std::int64_t split_count[3] = {}, split_bytes[3] = {}, releasable = 0, segments[3] = {};
    std::int64_t allocations[3] = {}, pending_bytes = 0, pending_blocks = 0;
    for (const auto& seg : snap) {
        const int t = seg.is_small ? kSmallPool : kLargePool;
        std::size_t sum = 0;
        for (const auto& b : seg.blocks) {
            sum += b.size;
            for (int k : {static_cast<int>(kAll), t}) {
                if (b.state == BlockState::active_allocated) {
                    allocated[k] += static_cast<std::int64_t>(b.size);
                    ++allocations[k];
                }
                if (b.state == BlockState::active_allocated) { // pending: the pool's, not the program's
                    active[k] += static_cast<std::int64_t>(b.size);
                    requested[k] += static_cast<std::int64_t>(b.requested_size);
                } else if (b.state == BlockState::active_pending_free) {
                    if (k == kAll) {
                        pending_bytes += static_cast<std::int64_t>(b.size);
                        ++pending_blocks;
                    }
                } else if (seg.blocks.size() > 1) {
                    ++split_count[k];
                    split_bytes[k] += static_cast<std::int64_t>(b.size);
                }
            }
        }
        REQUIRE(sum == seg.total_size); // blocks tile the segment
        if (seg.blocks.size() == 1 && seg.blocks[0].state == BlockState::inactive)
            releasable += static_cast<std::int64_t>(seg.total_size);
        for (int k : {static_cast<int>(kAll), t}) {
            reserved[k] += static_cast<std::int64_t>(seg.total_size);
            ++segments[k];
        }
    }
    for (int k = 0; k < 3; ++k) {
        INFO("stat type " << k);
        REQUIRE(s.reserved_bytes[k].current == reserved[k]);
        REQUIRE(s.segment[k].current == segments[k]);
        REQUIRE(s.allocated_bytes[k].current == allocated[k]);
        REQUIRE(s.allocation[k].current == allocations[k]);
        REQUIRE(s.active_bytes[k].current == active[k]);
        REQUIRE(s.requested_bytes[k].current == requested[k]);
        REQUIRE(s.inactive_split[k].current == split_count[k]);
        REQUIRE(s.inactive_split_bytes[k].current == split_bytes[k]);
    }
    REQUIRE(static_cast<std::int64_t>(pool.releasable_bytes()) == releasable);
    REQUIRE(pool.pending().bytes.current == pending_bytes);
    REQUIRE(pool.pending().blocks.current == pending_blocks);
    // The identity of pytorch-allocator.md 3.2 (non-expandable segments), plus the blocks that
    // wait for a fence (outside the torch keys).
    REQUIRE(s.reserved_bytes[kAll].current ==
            s.active_bytes[kAll].current + pending_bytes + s.inactive_split_bytes[kAll].current + releasable);
    REQUIRE(static_cast<std::int64_t>(dev.used_bytes()) == s.reserved_bytes[kAll].current);
    REQUIRE(s.num_device_alloc - s.num_device_free == s.segment[kAll].current);
}

void run(std::uint64_t seed, const char* conf, bool defer, std::size_t capacity) {
    SimBackend dev(capacity);
    DevicePool pool(dev, opts(conf, defer));
    std::mt19937_64 rng(seed);
    std::vector<std::uintptr_t> live;
    auto pick_size = [&]() -> std::size_t {
        const auto r = rng() % 100;
        if (r < 55)
            return rng() % 65536; // small pool
        if (r < 80)
            return 1 + rng() % (4 * MiB); // both pools, 20 MiB segments
        if (r < 95)
            return 8 * MiB + rng() % (24 * MiB); // 2 MiB-rounded segments
        return 40 * MiB + rng() % (100 * MiB);   // oversize when max_split_size is 64 MiB
    };
    for (int step = 0; step < 4000; ++step) {
        const auto op = rng() % 100;
        if (op < 55 || live.empty()) {
            std::uintptr_t p = 0;
            const int rc = pool.malloc(pick_size(), rng() % 3, &p);
            REQUIRE((rc == kSuccess || rc == kOutOfMemory));
            if (rc == kSuccess)
                live.push_back(p);
        } else if (op < 97) {
            const std::size_t i = rng() % live.size();
            REQUIRE(pool.free(live[i]) == kSuccess);
            live[i] = live.back();
            live.pop_back();
        } else if (op < 98) {
            pool.empty_cache();
        } else {
            pool.process_fences();
        }
        check_invariants(pool, dev);
    }
    for (auto p : live)
        REQUIRE(pool.free(p) == kSuccess);
    pool.process_fences();
    check_invariants(pool, dev);
    const auto s = pool.stats();
    CHECK(s.allocated_bytes[kAll].current == 0);
    CHECK(s.active_bytes[kAll].current == 0);
    CHECK(s.inactive_split_bytes[kAll].current == 0);
    CHECK(pool.releasable_bytes() == static_cast<std::size_t>(s.reserved_bytes[kAll].current));
    pool.empty_cache();
    CHECK(dev.used_bytes() == 0);
    CHECK(pool.invalid_frees() == 0);
}

} // namespace

TEST_CASE("property: default config, immediate frees", "[pool][property]") {
    run(12345, "", false, std::size_t{2} << 30);
}

TEST_CASE("property: max_split_size + divisions, deferred frees", "[pool][property]") {
    run(777, "max_split_size_mb:64,roundup_power2_divisions:[1:4,16:2,>:8]", true, std::size_t{2} << 30);
}

TEST_CASE("property: tight device, GC, release-and-retry, OOMs", "[pool][property]") {
    run(4242, "max_split_size_mb:64,per_process_memory_fraction:0.9,garbage_collection_threshold:0.6", true,
        std::size_t{600} << 20);
}
