// SPDX-License-Identifier: MIT
// Private memory pools (PyTorch's PrivatePool of a CUDA graph or MemPool): kept apart from the
// default pool, never released while in use. Addresses and bytes worked out by hand.
#include "pool_test_util.hpp"

#include <catch2/catch.hpp>

using namespace pooltest;
using stats::kAll;
using stats::kLargePool;

namespace {

std::uintptr_t must_malloc_in(DevicePool& p, std::size_t size, PoolId id, std::uintptr_t stream = 0) {
    std::uintptr_t ptr = 0;
    const int rc = p.malloc(size, stream, &ptr, id);
    if (rc != kSuccess)
        throw std::runtime_error("malloc failed with " + std::to_string(rc));
    return ptr;
}

constexpr PoolId kGraph{1, 0};   // a CUDA graph's pool (capture id 1)
constexpr PoolId kMemPool{0, 1}; // a torch.cuda.MemPool's

} // namespace

TEST_CASE("a private pool's blocks serve only its own requests", "[pool]") {
    SimBackend dev;
    DevicePool pool(dev, opts());
    // 4 MiB rounds to 4 MiB (large pool), its segment is 20 MiB (requests of 1-10 MiB): one
    // segment at B for the graph's pool; the free leaves it cached in that pool.
    const auto g1 = must_malloc_in(pool, 4 * MiB, kGraph);
    CHECK(g1 == B);
    REQUIRE(pool.free(g1) == kSuccess);
    // The same request to the default pool may not take it: a second 20 MiB segment, at B + 20 MiB.
    const auto d1 = must_malloc(pool, 4 * MiB);
    CHECK(d1 == B + 20 * MiB);
    auto s = pool.stats();
    CHECK(s.segment[kAll].current == 2);
    CHECK(s.reserved_bytes[kAll].current == 40 * MiB);
    CHECK(s.num_device_alloc == 2);
    // Another private pool does not take the graph's block either: a third segment.
    const auto m1 = must_malloc_in(pool, 4 * MiB, kMemPool);
    CHECK(m1 == B + 40 * MiB);
    // The graph's own next request reuses its cached block at B (split: 16 MiB stay cached).
    const auto g2 = must_malloc_in(pool, 4 * MiB, kGraph);
    CHECK(g2 == B);
    s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 60 * MiB);
    CHECK(s.allocated_bytes[kAll].current == 12 * MiB);
    CHECK(s.num_device_alloc == 3);
    // kDefaultPoolId is the default pool: the default block freed at B + 20 MiB is found again.
    REQUIRE(pool.free(d1) == kSuccess);
    CHECK(must_malloc_in(pool, 4 * MiB, kDefaultPoolId) == d1);
    CHECK(pool.stats().num_device_alloc == 3);
}

TEST_CASE("empty_cache gives back the default pool's free segments, not a private pool's", "[pool]") {
    SimBackend dev;
    Recorder rec;
    DevicePool pool(dev, opts(), &rec);
    const auto g = must_malloc_in(pool, 12 * MiB, kGraph); // 12 MiB: a 12 MiB segment at B
    const auto d = must_malloc(pool, 12 * MiB);            // at B + 12 MiB
    REQUIRE(pool.free(g) == kSuccess);
    REQUIRE(pool.free(d) == kSuccess);
    CHECK(pool.stats().reserved_bytes[kAll].current == 24 * MiB);
    CHECK(pool.releasable_bytes() == 12 * MiB); // only the default pool's segment can go
    pool.empty_cache();
    const auto s = pool.stats();
    CHECK(s.reserved_bytes[kAll].current == 12 * MiB);
    CHECK(s.segment[kLargePool].current == 1);
    CHECK(s.num_device_free == 1);
    CHECK(rec.events.back() == pooltest::Event{"segment_free", B + 12 * MiB, 12 * MiB});
    // The private pool's segment is still there for the graph: its request reuses it.
    CHECK(must_malloc_in(pool, 12 * MiB, kGraph) == B);
    CHECK(pool.stats().num_device_alloc == 2);
}

TEST_CASE("a full device: a private pool's cached segment is not released for another request", "[pool]") {
    SimBackend dev(40 * MiB);
    Recorder rec;
    DevicePool pool(dev, opts(), &rec);
    const auto g = must_malloc_in(pool, 20 * MiB, kGraph); // a 20 MiB segment, cached after the free
    REQUIRE(pool.free(g) == kSuccess);
    // 24 MiB for the default pool: 20 + 24 > 40. The retry releases what the default pool caches
    // (nothing) and the private pool keeps its segment: out of memory, 20 MiB still reserved.
    std::uintptr_t p = 0;
    CHECK(pool.malloc(24 * MiB, 0, &p) == kOutOfMemory);
    auto s = pool.stats();
    CHECK(s.num_ooms == 1);
    CHECK(s.num_alloc_retries == 1);
    CHECK(s.reserved_bytes[kAll].current == 20 * MiB);
    REQUIRE(rec.ooms.size() == 1);
    CHECK(rec.ooms[0].allocation_size == 24 * MiB);
    // A request to a private pool does not run release_cached_blocks before it fails (as
    // PyTorch's during a capture): a default 16 MiB segment is cached (36 MiB reserved), and 8 MiB
    // for the MemPool needs a 20 MiB segment: refused without a retry.
    const auto d = must_malloc(pool, 16 * MiB);
    REQUIRE(pool.free(d) == kSuccess);
    CHECK(pool.malloc(8 * MiB, 0, &p, kMemPool) == kOutOfMemory);
    s = pool.stats();
    CHECK(s.num_ooms == 2);
    CHECK(s.num_alloc_retries == 1);
    CHECK(s.reserved_bytes[kAll].current == 36 * MiB);
    // A default request of 18 MiB (more than the cached 16 MiB block) releases that segment and
    // retries: 20 + 18 = 38 MiB reserved.
    CHECK(pool.malloc(18 * MiB, 0, &p) == kSuccess);
    s = pool.stats();
    CHECK(s.num_alloc_retries == 2);
    CHECK(s.num_device_free == 1);
    CHECK(s.reserved_bytes[kAll].current == 38 * MiB);
}
