// SPDX-License-Identifier: MIT
// TorchMirror: PyTorch's allocator rebuilt from its trace events. Hand-computed sequences, then
// random ones: a DevicePool (PyTorch's policy, replayed byte for byte against real PyTorch)
// makes the decisions, its events alone are fed to a mirror, and the mirror must arrive at the
// same 122 statistics and the same segments and blocks after every step, without ever being
// told a block's size.
#include "pool/torch_mirror.hpp"

#include "pool_test_util.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace pooltest;
using stats::kAll;
using stats::kLargePool;
using stats::kSmallPool;

namespace {

constexpr std::uintptr_t A = 0x7f0000000000;
constexpr std::uintptr_t S1 = 0x100; // a stream

TorchRules rules(const char* conf = "") {
    TorchRules r;
    r.conf = parse_alloc_conf(conf, nullptr);
    return r;
}

/// Feeds a DevicePool's events to a mirror, as PyTorch's trace trackers would get them.
class Forward : public PoolListener {
public:
    TorchMirror* mirror = nullptr;
    std::uintptr_t stream = 0;
    void on_alloc(std::uintptr_t p, std::size_t, std::size_t requested, std::uintptr_t s, RequestSite) override {
        mirror->alloc(p, requested, s, {});
    }
    void on_free_requested(std::uintptr_t p, std::size_t, std::size_t) override { mirror->free_requested(p); }
    void on_free_completed(std::uintptr_t p, std::size_t, std::size_t) override { mirror->free_completed(p); }
    void on_segment_alloc(std::uintptr_t p, std::size_t s, RequestSite) override {
        mirror->segment_alloc(p, s, stream, {});
    }
    void on_segment_free(std::uintptr_t p, std::size_t s) override { mirror->segment_free(p, s); }
    void on_segment_map(std::uintptr_t p, std::size_t s, RequestSite) override {
        mirror->segment_map(p, s, stream, {});
    }
    void on_segment_unmap(std::uintptr_t p, std::size_t s) override { mirror->segment_unmap(p, s); }
    void on_oom(const OomInfo& i, RequestSite) override { mirror->oom(i.device_free, i.rounded, 0); }
};

void require_same_stats(const stats::DeviceStats& pool, stats::DeviceStats mirror) {
    // Calls that leave no trace event: the attach layer takes these two from PyTorch itself.
    mirror.num_alloc_retries = pool.num_alloc_retries;
    mirror.num_sync_all_streams = pool.num_sync_all_streams;
    const auto a = stats::flatten(pool);
    const auto b = stats::flatten(mirror);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].first);
        REQUIRE(a[i].second == b[i].second);
    }
}

void require_same_layout(const std::vector<SegmentInfo>& pool, const std::vector<SegmentInfo>& mirror) {
    REQUIRE(pool.size() == mirror.size());
    for (std::size_t i = 0; i < pool.size(); ++i) {
        INFO("segment " << i);
        REQUIRE(pool[i].address == mirror[i].address);
        REQUIRE(pool[i].total_size == mirror[i].total_size);
        REQUIRE(pool[i].allocated_size == mirror[i].allocated_size);
        REQUIRE(pool[i].blocks.size() == mirror[i].blocks.size());
        for (std::size_t k = 0; k < pool[i].blocks.size(); ++k) {
            REQUIRE(pool[i].blocks[k].address == mirror[i].blocks[k].address);
            REQUIRE(pool[i].blocks[k].size == mirror[i].blocks[k].size);
            REQUIRE(pool[i].blocks[k].state == mirror[i].blocks[k].state);
        }
    }
}

} // namespace

TEST_CASE("mirror: small pool split, inactive split and merge by PyTorch's rules", "[torch_mirror]") {
    Recorder heard;
    TorchMirror m(rules(), &heard);
    m.segment_alloc(A, 2 * MiB, S1, {});
    CHECK(m.alloc(A, 1000, S1, {}) == 1024);      // round_size: 1024; 2 MiB - 1024 left: split
    CHECK(m.alloc(A + 1024, 300, S1, {}) == 512); // 512, cut from the split remainder
    auto s = m.stats();
    CHECK(s.allocated_bytes[kAll].current == 1536);
    CHECK(s.allocated_bytes[kSmallPool].current == 1536);
    CHECK(s.allocated_bytes[kLargePool].current == 0);
    CHECK(s.requested_bytes[kAll].current == 1300);
    CHECK(s.reserved_bytes[kSmallPool].current == 2 * MiB);
    CHECK(s.segment[kAll].current == 1);
    CHECK(s.inactive_split[kAll].current == 1);
    CHECK(s.inactive_split_bytes[kAll].current == static_cast<std::int64_t>(2 * MiB - 1536));
    CHECK(s.num_device_alloc == 1);

    m.free_requested(A);
    s = m.stats();
    CHECK(s.allocated_bytes[kAll].current == 512);
    CHECK(s.active_bytes[kAll].current == 1536); // record_stream: still active until completed
    m.free_completed(A);                         // its neighbour is allocated: no merge
    s = m.stats();
    CHECK(s.active_bytes[kAll].current == 512);
    CHECK(s.requested_bytes[kAll].current == 300);
    CHECK(s.inactive_split[kAll].current == 2);
    CHECK(s.inactive_split_bytes[kAll].current == static_cast<std::int64_t>(2 * MiB - 512));

    m.free_requested(A + 1024);
    m.free_completed(A + 1024); // merges both sides: one free block, the whole segment
    s = m.stats();
    CHECK(s.inactive_split[kAll].current == 0);
    CHECK(s.inactive_split_bytes[kAll].current == 0);
    CHECK(s.active[kAll].current == 0);
    CHECK(s.allocation[kAll].allocated == 2);
    CHECK(s.allocation[kAll].freed == 2);
    const auto snap = m.snapshot();
    REQUIRE(snap.size() == 1);
    REQUIRE(snap[0].blocks.size() == 1);
    CHECK(snap[0].blocks[0].size == 2 * MiB);

    m.segment_free(A, 2 * MiB);
    s = m.stats();
    CHECK(s.reserved_bytes[kAll].current == 0);
    CHECK(s.reserved_bytes[kAll].peak == static_cast<std::int64_t>(2 * MiB));
    CHECK(s.num_device_free == 1);
    CHECK(m.mismatches() == 0);
    const std::vector<Event> want = {{"segment_alloc", A, 2 * MiB},     {"alloc", A, 1024},
                                     {"alloc", A + 1024, 512},          {"free_requested", A, 1024},
                                     {"free_completed", A, 1024},       {"free_requested", A + 1024, 512},
                                     {"free_completed", A + 1024, 512}, {"segment_free", A, 2 * MiB}};
    CHECK(heard.events == want);
}

TEST_CASE("mirror: large pool keeps a remainder of 1 MiB or less with the block", "[torch_mirror]") {
    TorchMirror m(rules(), nullptr);
    m.segment_alloc(A, 20 * MiB, 0, {});
    // Rounds to 19 MiB + 512: 1 MiB - 512 left, not split: the block handed out is all 20 MiB.
    CHECK(m.alloc(A, 19 * MiB + 100, 0, {}) == 20 * MiB);
    auto s = m.stats();
    CHECK(s.allocated_bytes[kLargePool].current == static_cast<std::int64_t>(20 * MiB));
    CHECK(s.inactive_split[kAll].current == 0);
    m.free_requested(A);
    m.free_completed(A);
    m.alloc(A, 8 * MiB, 0, {}); // 12 MiB left (> 1 MiB): split
    s = m.stats();
    CHECK(s.allocated_bytes[kAll].current == static_cast<std::int64_t>(8 * MiB));
    CHECK(s.inactive_split_bytes[kLargePool].current == static_cast<std::int64_t>(12 * MiB));
}

TEST_CASE("mirror: oversize blocks are never split (max_split_size_mb)", "[torch_mirror]") {
    TorchMirror m(rules("max_split_size_mb:40"), nullptr);
    m.segment_alloc(A, 60 * MiB, 0, {});
    m.alloc(A, 41 * MiB, 0, {}); // 41 MiB >= max_split_size: takes the whole cached block
    auto s = m.stats();
    CHECK(s.allocated_bytes[kAll].current == static_cast<std::int64_t>(60 * MiB));
    CHECK(s.oversize_allocations.current == 1);
    CHECK(s.oversize_segments.current == 1);
    CHECK(s.max_split_size == static_cast<std::int64_t>(40 * MiB));
}

TEST_CASE("mirror: power-of-two rounding divisions follow PyTorch's function when given", "[torch_mirror]") {
    TorchRules r = rules();
    r.divisions = [](std::size_t) -> std::size_t { return 4; };
    TorchMirror m(r, nullptr);
    m.segment_alloc(A, 20 * MiB, 0, {});
    m.alloc(A, 1200 * 1024, 0, {}); // in [1 MiB, 2 MiB) by quarters: 1.25 MiB
    CHECK(m.stats().allocated_bytes[kAll].current == static_cast<std::int64_t>(1280 * 1024));
}

TEST_CASE("mirror: expandable segments map, split at any remainder, unmap whole pages", "[torch_mirror]") {
    TorchMirror m(rules("expandable_segments:True"), nullptr);
    m.segment_map(A, 40 * MiB, S1, {});
    m.alloc(A, 3 * MiB, S1, {}); // expandable: split whenever 512 B or more are left
    auto s = m.stats();
    CHECK(s.allocated_bytes[kLargePool].current == static_cast<std::int64_t>(3 * MiB));
    CHECK(s.reserved_bytes[kLargePool].current == static_cast<std::int64_t>(40 * MiB));
    CHECK(s.inactive_split[kAll].current == 0);    // expandable blocks stay out of inactive_split
    CHECK(s.segment[kAll].current == 0);           // and out of the segment counts
    m.segment_map(A + 40 * MiB, 20 * MiB, S1, {}); // grows: merges with the free block before it
    m.alloc(A + 3 * MiB, 50 * MiB, S1, {});
    CHECK(m.stats().allocated_bytes[kAll].current == static_cast<std::int64_t>(53 * MiB));
    m.free_requested(A + 3 * MiB);
    m.free_completed(A + 3 * MiB);
    m.segment_unmap(A + 20 * MiB, 40 * MiB); // the free pages at the end
    s = m.stats();
    CHECK(s.reserved_bytes[kAll].current == static_cast<std::int64_t>(20 * MiB));
    CHECK(s.num_device_alloc == 2);
    CHECK(s.num_device_free == 1);
    const auto snap = m.snapshot();
    REQUIRE(snap.size() == 1);
    CHECK(snap[0].is_expandable);
    CHECK(snap[0].total_size == 20 * MiB);
    CHECK(m.mismatches() == 0);
}

TEST_CASE("mirror: private pools (CUDA graphs, MemPool) are counted apart", "[torch_mirror]") {
    TorchMirror m(rules(), nullptr);
    const MempoolId graph{1, 0};
    m.segment_alloc(A, 20 * MiB, 0, graph);
    m.alloc(A, 4 * MiB, 0, graph);
    m.segment_alloc(A + 64 * MiB, 2 * MiB, 0, {});
    m.alloc(A + 64 * MiB, 4096, 0, {});
    auto pools = m.private_pools();
    REQUIRE(pools.size() == 1);
    CHECK(pools[0].id == graph);
    CHECK(pools[0].reserved == static_cast<std::int64_t>(20 * MiB));
    CHECK(pools[0].allocated == static_cast<std::int64_t>(4 * MiB));
    m.free_requested(A);
    m.free_completed(A);
    pools = m.private_pools();
    CHECK(pools[0].allocated == 0);
    CHECK(pools[0].peak_allocated == static_cast<std::int64_t>(4 * MiB));
}

TEST_CASE("mirror: events that do not fit are counted, never fatal", "[torch_mirror]") {
    TorchMirror m(rules(), nullptr);
    CHECK(m.alloc(A, 512, 0, {}) == 0); // no segment there: no block handed out
    m.free_requested(A + 4096);         // nothing there
    m.free_completed(A + 4096);
    m.segment_free(A, 2 * MiB);
    CHECK(m.mismatches() == 4); // each event that did not fit, once
    CHECK(m.stats().allocated_bytes[kAll].current == 0);
    m.segment_alloc(A, 2 * MiB, 0, {});
    // Inside a free block: that block is split there, and the block handed out is 512 B.
    CHECK(m.alloc(A + 4096, 512, 0, {}) == 512);
    CHECK(m.stats().allocated_bytes[kAll].current == 512);
    CHECK(m.mismatches() == 5);
}

TEST_CASE("mirror: a split PyTorch made against its usual rule is repaired", "[torch_mirror]") {
    // A CUDA-graph checkpoint restore recreates a recorded layout: here a 19 MiB block in a 20 MiB
    // segment (a 1 MiB remainder is never split off by should_split), then a block at the rest.
    TorchMirror m(rules(), nullptr);
    m.segment_alloc(A, 20 * MiB, 0, {});
    m.alloc(A, 19 * MiB, 0, {}); // the mirror: the whole 20 MiB
    CHECK(m.stats().allocated_bytes[kAll].current == static_cast<std::int64_t>(20 * MiB));
    m.alloc(A + 19 * MiB, 1 * MiB, 0, {});
    const auto s = m.stats();
    CHECK(s.allocated_bytes[kAll].current == static_cast<std::int64_t>(20 * MiB)); // 19 + 1
    CHECK(s.allocation[kAll].current == 2);
    CHECK(m.mismatches() == 1);
    m.free_requested(A);
    m.free_completed(A);
    CHECK(m.stats().allocated_bytes[kAll].current == static_cast<std::int64_t>(1 * MiB));
    CHECK(m.stats().active_bytes[kAll].current == static_cast<std::int64_t>(1 * MiB));
}

TEST_CASE("mirror: OOM counted and reported with the largest free block", "[torch_mirror]") {
    Recorder heard;
    TorchMirror m(rules(), &heard);
    m.segment_alloc(A, 20 * MiB, 0, {});
    m.alloc(A, 8 * MiB, 0, {});
    m.oom(1000, 30 * MiB, 0);
    CHECK(m.stats().num_ooms == 1);
    REQUIRE(heard.ooms.size() == 1);
    CHECK(heard.ooms[0].largest_free_block == 12 * MiB);
    CHECK(heard.ooms[0].allocated == static_cast<std::int64_t>(8 * MiB));
    CHECK(heard.ooms[0].device_free == 1000);
}

TEST_CASE("mirror: the site given with an event reaches the listener with it", "[torch_mirror]") {
    Recorder heard;
    TorchMirror m(rules(), &heard);
    m.segment_alloc(A, 20 * MiB, 0, {}, 5);
    m.alloc(A, 8 * MiB, 0, {}, 6);
    m.alloc(A + 8 * MiB, 1 * MiB, 0, {});
    m.oom(1000, 30 * MiB, 0, 7);
    Recorder heard_exp;
    TorchMirror e(rules("expandable_segments:True"), &heard_exp);
    e.segment_map(A, 40 * MiB, S1, {}, 8);
    CHECK(heard.sites == std::vector<RequestSite>{5, 6, 0, 7});
    CHECK(heard_exp.sites == std::vector<RequestSite>{8});
    CHECK(m.mismatches() == 0);
    CHECK(e.mismatches() == 0);
}

namespace {

void random_against_pool(const char* conf, int streams, unsigned seed) {
    SimBackend dev(64ull << 30);
    PoolOptions o = opts(conf);
    Forward fwd;
    DevicePool pool(dev, o, &fwd);
    TorchMirror mirror(rules(conf), nullptr);
    fwd.mirror = &mirror;
    std::mt19937_64 rng(seed);
    std::vector<std::uintptr_t> live;
    const std::size_t sizes[] = {1,       500,     512,      4000,     100000,  1 << 20, (1 << 20) + 1,
                                 3 << 20, 9 << 20, 11 << 20, 25 << 20, 70 << 20};
    for (int step = 0; step < 3000; ++step) {
        const int op = static_cast<int>(rng() % 10);
        if (op < 5 || live.empty()) {
            std::size_t size = sizes[rng() % std::size(sizes)];
            size += rng() % (size / 3 + 1);
            std::uintptr_t p = 0;
            if (pool.malloc(size, streams > 1 ? (rng() % streams) * 0x100 : 0, &p) == kSuccess)
                live.push_back(p);
        } else if (op < 9) {
            const std::size_t i = rng() % live.size();
            REQUIRE(pool.free(live[i]) == kSuccess);
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            pool.empty_cache();
        }
        INFO("step " << step);
        require_same_stats(pool.stats(), mirror.stats());
        if (step % 50 == 0)
            require_same_layout(pool.snapshot(), mirror.snapshot());
    }
    CHECK(mirror.mismatches() == 0);
}

} // namespace

TEST_CASE("mirror: random sequences arrive at the pool's statistics and layout", "[torch_mirror]") {
    SECTION("defaults, one stream") {
        random_against_pool("", 1, 1);
    }
    SECTION("defaults, three streams") {
        random_against_pool("", 3, 2);
    }
    SECTION("max_split_size_mb:64") {
        random_against_pool("max_split_size_mb:64", 2, 3);
    }
    SECTION("roundup_power2_divisions:4") {
        random_against_pool("roundup_power2_divisions:4", 2, 4);
    }
    SECTION("expandable_segments:True") {
        random_against_pool("expandable_segments:True", 1, 5);
    }
}

TEST_CASE("mirror: the program's resets are followed, the whole run is kept", "[torch_mirror]") {
    TorchMirror m(rules(), nullptr);
    m.segment_alloc(A, 20 * MiB, 0, {});
    m.alloc(A, 8 * MiB, 0, {});
    m.free_requested(A);
    m.free_completed(A);
    m.program_reset_peak(); // torch.cuda.reset_peak_memory_stats()
    m.alloc(A, 2 * MiB, 0, {});
    auto s = m.stats();
    CHECK(s.allocated_bytes[kAll].peak == static_cast<std::int64_t>(2 * MiB));
    auto w = m.whole_run_stats();
    CHECK(w.allocated_bytes[kAll].peak == static_cast<std::int64_t>(8 * MiB));
    m.program_reset_accumulated(); // torch.cuda.reset_accumulated_memory_stats()
    s = m.stats();
    CHECK(s.allocation[kAll].allocated == 0);
    CHECK(s.num_device_alloc == 0);
    w = m.whole_run_stats();
    CHECK(w.allocation[kAll].allocated == 2);
    CHECK(w.allocated_bytes[kAll].allocated == static_cast<std::int64_t>(10 * MiB));
    CHECK(w.num_device_alloc == 1);
    CHECK(m.program_resets() == 2);
}
