// SPDX-License-Identifier: MIT
// PoolModel: PyTorch's allocator fed the requests of a pool that holds frees back. Expected
// values are worked out by hand from PyTorch's rules (see test_device_pool.cpp for the rules).
#include "pool/pool_model.hpp"

#include <catch2/catch.hpp>

using gpumemprof::pool::AllocConf;
using gpumemprof::pool::PoolModel;
using gpumemprof::stats::kAll;
using gpumemprof::stats::kLargePool;
using gpumemprof::stats::kSmallPool;

namespace {
constexpr std::size_t kMiB = 1024 * 1024;
// Stand-ins for the real pool's addresses: the model must not care what they are.
constexpr std::uintptr_t kReal = 0x7000'0000'0000;
} // namespace

TEST_CASE("pool model: a freed block is reused at once, where a fenced pool would grow", "[pool_model]") {
    PoolModel m(AllocConf{}, 0, 16ull << 30);
    // The situation a fenced pool meets when the CPU runs ahead: 1 MiB freed and asked for
    // again while the device may still be using the first one, ten times over. A fenced pool
    // hands out ten different addresses; PyTorch reuses the one block every time.
    for (int i = 0; i < 10; ++i) {
        m.on_alloc(kReal + i * 2 * kMiB, kMiB, 0);
        m.on_free(kReal + i * 2 * kMiB);
    }
    const auto s = m.stats();
    // 1 MiB is a small-pool request (<= 1 MiB): one 2 MiB segment, split, merged back at each free.
    CHECK(s.num_device_alloc == 1);
    CHECK(s.reserved_bytes[kAll].peak == static_cast<std::int64_t>(2 * kMiB));
    CHECK(s.allocated_bytes[kAll].peak == static_cast<std::int64_t>(kMiB));
    CHECK(s.allocation[kSmallPool].allocated == 10);
    CHECK(s.allocation[kAll].current == 0);
    CHECK(s.requested_bytes[kAll].allocated == static_cast<std::int64_t>(10 * kMiB));
    CHECK(m.unserved() == 0);
}

TEST_CASE("pool model: large blocks, unknown frees, resets and empty_cache", "[pool_model]") {
    PoolModel m(AllocConf{}, 0, 16ull << 30);
    m.on_alloc(kReal, 3 * kMiB, 0);            // large pool: a 20 MiB segment, split
    m.on_alloc(kReal + 0x100000, 3 * kMiB, 0); // from the same segment's remainder
    m.on_free(kReal + 0x999);                  // never allocated: ignored
    auto s = m.stats();
    CHECK(s.allocated_bytes[kLargePool].current == static_cast<std::int64_t>(6 * kMiB));
    CHECK(s.reserved_bytes[kAll].current == static_cast<std::int64_t>(20 * kMiB));
    CHECK(s.num_device_alloc == 1);
    m.on_free(kReal);
    m.on_free(kReal); // a second free of the same real pointer: already gone, ignored
    s = m.stats();
    CHECK(s.allocation[kAll].current == 1);
    CHECK(s.allocated_bytes[kAll].current == static_cast<std::int64_t>(3 * kMiB));

    m.reset_peak_stats();
    CHECK(m.stats().allocated_bytes[kAll].peak == static_cast<std::int64_t>(3 * kMiB));
    m.on_free(kReal + 0x100000);
    m.empty_cache(); // the wholly free 20 MiB segment goes back
    s = m.stats();
    CHECK(s.reserved_bytes[kAll].current == 0);
    CHECK(s.num_device_free == 1);
    m.reset_accumulated_stats();
    CHECK(m.stats().allocation[kAll].allocated == 0);
}

TEST_CASE("pool model: a request beyond the device is left out and counted", "[pool_model]") {
    PoolModel m(AllocConf{}, 0, 64 * kMiB);
    m.on_alloc(kReal, 40 * kMiB, 0);
    m.on_alloc(kReal + 64 * kMiB, 40 * kMiB, 0); // 80 MiB in all: more than the 64 MiB device
    CHECK(m.unserved() == 1);
    const auto s = m.stats();
    CHECK(s.num_ooms == 1);
    CHECK(s.allocated_bytes[kAll].current == static_cast<std::int64_t>(40 * kMiB));
    m.on_free(kReal + 64 * kMiB); // the unserved one: nothing to free
    m.on_free(kReal);
    CHECK(m.stats().allocated_bytes[kAll].current == 0);
}

TEST_CASE("pool model: per_process_memory_fraction applies as in PyTorch", "[pool_model]") {
    AllocConf conf;
    conf.per_process_memory_fraction = 0.5;
    PoolModel m(conf, 0, 100 * kMiB);
    m.on_alloc(kReal, 40 * kMiB, 0); // allowed: 50 MiB
    m.on_alloc(kReal + 64 * kMiB, 20 * kMiB, 0);
    CHECK(m.unserved() == 1);
    m.drop_all(); // the context vanished: nothing is live any more (the block counts as freed)
    CHECK(m.stats().allocated_bytes[kAll].current == 0);
    CHECK(m.stats().allocation[kAll].freed == 1);
    m.on_free(kReal); // forgotten with the context: not freed a second time
    CHECK(m.stats().allocation[kAll].freed == 1);
}
