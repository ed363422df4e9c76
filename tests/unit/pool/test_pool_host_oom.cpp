// SPDX-License-Identifier: MIT
// Host memory runs out inside the pool: the Nth operator new of a malloc/free throws. The call
// fails (or succeeds) and the pool stays whole: no block lost between the pending lists and the
// free sets, stats agree with the segments, and once everything is freed empty_cache gives every
// segment back. (The promise of ensure_spares: nothing allocates after the state began to change.)
#include "counting_new.hpp"
#include "pool_test_util.hpp"
#include "util/swallowed.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace pooltest;
using stats::kAll;

namespace {

/// Stats against the segments: allocated/active from the blocks, and the identity
/// reserved = active + pending + inactive split + wholly free.
void check_whole(DevicePool& pool, SimBackend& dev) {
    const auto s = pool.stats();
    std::int64_t reserved = 0, allocated = 0, pending = 0, split = 0, releasable = 0;
    for (const auto& seg : pool.snapshot()) {
        reserved += static_cast<std::int64_t>(seg.total_size);
        for (const auto& b : seg.blocks) {
            if (b.state == BlockState::active_allocated)
                allocated += static_cast<std::int64_t>(b.size);
            else if (b.state == BlockState::active_pending_free)
                pending += static_cast<std::int64_t>(b.size);
            else if (seg.blocks.size() > 1)
                split += static_cast<std::int64_t>(b.size);
            else
                releasable += static_cast<std::int64_t>(b.size);
        }
    }
    REQUIRE(s.reserved_bytes[kAll].current == reserved);
    REQUIRE(s.allocated_bytes[kAll].current == allocated);
    REQUIRE(s.active_bytes[kAll].current == allocated);
    REQUIRE(pool.pending().bytes.current == pending);
    REQUIRE(s.inactive_split_bytes[kAll].current == split);
    REQUIRE(static_cast<std::int64_t>(pool.releasable_bytes()) == releasable);
    REQUIRE(static_cast<std::int64_t>(dev.used_bytes()) == reserved);
}

} // namespace

TEST_CASE("host out of memory inside malloc/free leaves the pool whole", "[pool][hostoom]") {
    long thrown_total = 0;
    for (long n = 0; n < 40; ++n) {
        INFO("the allocation after " << n << " throws");
        SimBackend dev;
        dev.set_fences_busy(true);
        DevicePool pool(dev, opts("", true));
        // Many pending small blocks between live ones (each retires without merging, so each
        // needs a set node of its own), then a miss that retires them all at once: 2048 blocks of
        // 1 KiB fill one 2 MiB small segment, so no free block is left for a 4 KiB request, which
        // fences the waiting blocks, waits for that fence (same pool: they might serve it) and
        // retires all 1024.
        std::vector<std::uintptr_t> live, freed;
        for (int i = 0; i < 2048; ++i)
            (i % 2 ? freed : live).push_back(must_malloc(pool, 1000));
        for (auto p : freed)
            REQUIRE(pool.free(p) == kSuccess);
        dev.complete_fences();
        const long before = counting_new::thrown();
        std::uintptr_t q = 0;
        int rc;
        {
            counting_new::FailAfter armed(n);
            rc = pool.malloc(4096, 0, &q); // a miss: retires 1024 blocks, then grows
        }
        thrown_total += counting_new::thrown() - before;
        check_whole(pool, dev);
        {
            counting_new::FailAfter armed(n);
            for (auto p : live)
                pool.free(p); // some may fail with host OOM; those blocks stay allocated
        }
        check_whole(pool, dev);
        // Everything the program still holds goes back; the cache then empties completely.
        if (rc == kSuccess)
            REQUIRE(pool.free(q) == kSuccess);
        for (const auto& seg : pool.snapshot())
            for (const auto& b : seg.blocks)
                if (b.state == BlockState::active_allocated)
                    REQUIRE(pool.free(b.address) == kSuccess);
        pool.empty_cache();
        check_whole(pool, dev);
        CHECK(dev.live_segments() == 0);
        CHECK(pool.stats().reserved_bytes[kAll].current == 0);
        // The request's retirements did happen (or host memory failed before any of them).
        CHECK((rc != kSuccess || pool.counters().fence_waits > 0));
    }
    CHECK(thrown_total > 0); // the failure was injected at least once
}

TEST_CASE("a host OOM caught inside the pool is counted as an internal error", "[pool][host_oom]") {
    SimBackend dev;
    DevicePool pool(dev, opts("", true));
    const std::uintptr_t p = must_malloc(pool, 4096);
    REQUIRE(pool.snapshot().size() == 1);
    const std::uint64_t before = gpumemprof::util::swallowed_count();
    std::vector<SegmentInfo> seen;
    {
        counting_new::FailAfter armed(0); // the snapshot's first allocation fails
        seen = pool.snapshot();
    }
    CHECK(seen.empty()); // what it could not build is missing, the pool goes on
    CHECK(gpumemprof::util::swallowed_count() == before + 1);
    CHECK(pool.free(p) == kSuccess);
    CHECK(pool.snapshot().size() == 1);
}
