// SPDX-License-Identifier: MIT
// round_size, roundup_power2_next_division, allocation_size, divisions_for (pytorch-allocator.md 1.2-1.6).
#include "pool/rounding.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof::pool;

namespace {
constexpr std::size_t MiB = 1024 * 1024;

AllocConf all_divisions(std::size_t d) {
    AllocConf c;
    c.roundup_power2_divisions.fill(d);
    return c;
}
} // namespace

TEST_CASE("round_size without divisions rounds to 512", "[rounding]") {
    const AllocConf c;
    CHECK(round_size(c, 0) == 512);
    CHECK(round_size(c, 1) == 512);
    CHECK(round_size(c, 511) == 512);
    CHECK(round_size(c, 512) == 512);
    CHECK(round_size(c, 513) == 1024);
    CHECK(round_size(c, 1200) == 1536); // 3 x 512
    CHECK(round_size(c, MiB) == MiB);
    CHECK(round_size(c, MiB + 1) == MiB + 512);
    CHECK(round_size(c, 300 * MiB + 1) == 300 * MiB + 512);
}

TEST_CASE("roundup_power2_next_division", "[rounding]") {
    CHECK(roundup_power2_next_division(1200, 4) == 1280);           // floor 1024, step 256
    CHECK(roundup_power2_next_division(300 * MiB, 4) == 320 * MiB); // floor 256 MiB, step 64 MiB
    CHECK(roundup_power2_next_division(4096, 8) == 4096);           // powers of two stay
    CHECK(roundup_power2_next_division(1280, 4) == 1280);           // already on a step
    CHECK(roundup_power2_next_division(5 * MiB, 2) == 6 * MiB);     // floor 4 MiB, step 2 MiB
}

TEST_CASE("round_size uses divisions only above 512 * divisions", "[rounding]") {
    const AllocConf c4 = all_divisions(4);
    // 1200 <= 512 * 4 = 2048: plain 512 rounding -> 1536 (not the helper's 1280).
    CHECK(round_size(c4, 1200) == 1536);
    CHECK(round_size(c4, 2048) == 2048);
    // 2049 > 2048: floor 2048, step 512 -> 2560.
    CHECK(round_size(c4, 2049) == 2560);
    CHECK(round_size(c4, 300 * MiB) == 320 * MiB);
    // 1 division: no power-of-two rounding at all.
    CHECK(round_size(all_divisions(1), 300 * MiB + 1) == 300 * MiB + 512);
}

TEST_CASE("divisions_for: index floor(log2(size)) - 20 clamped to 0..15", "[rounding]") {
    AllocConf c;
    for (std::size_t i = 0; i < 16; ++i)
        c.roundup_power2_divisions[i] = i + 100;
    CHECK(divisions_for(c, 0) == 100);
    CHECK(divisions_for(c, 512) == 100);         // below 1 MiB -> entry 0
    CHECK(divisions_for(c, 2 * MiB - 1) == 100); // log2 = 20 -> entry 0
    CHECK(divisions_for(c, 2 * MiB) == 101);     // log2 = 21 -> entry 1
    CHECK(divisions_for(c, 3 * MiB) == 101);
    CHECK(divisions_for(c, 4 * MiB) == 102);
    CHECK(divisions_for(c, std::size_t{1} << 34) == 114); // 16 GiB: 34 - 20
    CHECK(divisions_for(c, std::size_t{1} << 35) == 115); // 32 GiB: entry 15
    CHECK(divisions_for(c, std::size_t{1} << 40) == 115); // clamped
}

TEST_CASE("PyTorch's list test vectors (keys are lower bounds in MB)", "[rounding]") {
    std::vector<std::string> w;
    const AllocConf a = parse_alloc_conf("roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]", &w);
    CHECK(w.empty());
    CHECK(divisions_for(a, 64 * MiB) == 8);
    CHECK(divisions_for(a, 128 * MiB) == 8);
    CHECK(divisions_for(a, 256 * MiB) == 16);
    CHECK(divisions_for(a, 512 * MiB) == 1);
    CHECK(divisions_for(a, 1024 * MiB) == 0);
    CHECK(divisions_for(a, 2048 * MiB) == 8);
    CHECK(divisions_for(a, 4096 * MiB) == 2);

    const AllocConf b = parse_alloc_conf("roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]", &w);
    CHECK(w.empty());
    CHECK(divisions_for(b, 32 * MiB) == 8);
    CHECK(divisions_for(b, 64 * MiB) == 8);
    CHECK(divisions_for(b, 128 * MiB) == 2);
    CHECK(divisions_for(b, 256 * MiB) == 4);
    CHECK(divisions_for(b, 512 * MiB) == 2);
    CHECK(divisions_for(b, 1024 * MiB) == 4);
    CHECK(divisions_for(b, 2048 * MiB) == 1);
    CHECK(divisions_for(b, 4096 * MiB) == 1);
    CHECK(divisions_for(b, 8192 * MiB) == 1);
}

TEST_CASE("docs example [256:1,512:2,1024:4,>:8] with code (lower-bound) semantics", "[rounding]") {
    std::vector<std::string> w;
    const AllocConf c = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", &w);
    CHECK(w.empty());
    // 600 MiB lies in [512, 1024) MiB -> key 512 -> 2 divisions: floor 512 MiB, step 256 -> 768 MiB.
    // (The docs' upper-bound reading would give 4 divisions -> 640 MiB.)
    CHECK(round_size(c, 600 * MiB) == 768 * MiB);
    // 100 MiB is below the first key 256, which fills below with 1 -> no power-two rounding.
    CHECK(round_size(c, 100 * MiB + 1) == 100 * MiB + 512);
    // 3000 MiB in [2048, 4096): filled by ">" with 8: floor 2048, step 256 -> 3072 MiB.
    CHECK(round_size(c, 3000 * MiB) == 3072 * MiB);
}

TEST_CASE("allocation_size (get_allocation_size)", "[rounding]") {
    CHECK(allocation_size(512) == 2 * MiB);
    CHECK(allocation_size(MiB) == 2 * MiB);        // <= kSmallSize -> kSmallBuffer
    CHECK(allocation_size(MiB + 512) == 20 * MiB); // < 10 MiB -> kLargeBuffer
    CHECK(allocation_size(10 * MiB - 512) == 20 * MiB);
    CHECK(allocation_size(10 * MiB) == 10 * MiB); // >= 10 MiB -> 2 MiB multiple
    CHECK(allocation_size(10 * MiB + 512) == 12 * MiB);
    CHECK(allocation_size(21 * MiB) == 22 * MiB);
}

// Size class by size class, for roundup_power2_divisions 1, 2, 4, 8 and 16, values worked out by
// hand from PyTorch's round_size (CUDACachingAllocator.cpp): below 512 B -> 512; with d > 1 and
// size > 512 * d, the next multiple of floor_pow2(size) / d (powers of two stay); else the next
// multiple of 512. The divisions come from the interval floor(log2(size)) - 20, clamped to 0..15.
TEST_CASE("round_size size classes for 1, 2, 4, 8, 16 divisions", "[rounding]") {
    struct Case {
        std::size_t divisions, size, rounded;
    };
    const Case cases[] = {
        // 1 division: never power-of-two rounding (PyTorch needs divisions > 1).
        {1, 1, 512},
        {1, 2049, 2560},
        {1, MiB - 1, MiB},
        {1, MiB + 1, MiB + 512},
        {1, 3 * MiB, 3 * MiB},
        {1, 10 * MiB + 1, 10 * MiB + 512},
        // 2 divisions: guard 1024 B, steps of floor / 2.
        {2, 1024, 1024},
        {2, 1025, 1536},             // floor 1024, step 512
        {2, 1537, 2048},             // next step is the next power of two
        {2, 600 * 1024, 768 * 1024}, // floor 512 KiB, step 256 KiB
        {2, MiB - 1, MiB},
        {2, MiB, MiB},
        {2, MiB + 1, MiB + MiB / 2},
        {2, 2 * MiB - 1, 2 * MiB},
        {2, 2 * MiB + 1, 3 * MiB},
        {2, 10 * MiB, 12 * MiB}, // floor 8 MiB, step 4 MiB
        {2, 20 * MiB, 24 * MiB}, // floor 16 MiB, step 8 MiB
        // 4 divisions: guard 2048 B.
        {4, 1200, 1536}, // <= 2048: plain 512 rounding
        {4, 2048, 2048},
        {4, 2049, 2560},     // floor 2048, step 512
        {4, 36864, 40960},   // 36 KiB: floor 32 KiB, step 8 KiB -> 40 KiB
        {4, 147456, 163840}, // 144 KiB (a 3x3x64x64 fp32 weight) -> 160 KiB
        {4, 600000, 655360}, // floor 512 KiB, step 128 KiB -> 640 KiB
        {4, 786433, 917504}, // just above 768 KiB -> 896 KiB
        {4, 917505, MiB},    // just above 896 KiB -> 1 MiB (still the small pool)
        {4, MiB - 1, MiB},
        {4, MiB, MiB},
        {4, MiB + 1, MiB + MiB / 4}, // floor 1 MiB, step 256 KiB
        {4, 2 * MiB - 1, 2 * MiB},
        {4, 2 * MiB, 2 * MiB},
        {4, 2 * MiB + 1, 2 * MiB + MiB / 2}, // floor 2 MiB, step 512 KiB
        {4, 9 * MiB, 10 * MiB},              // floor 8 MiB, step 2 MiB
        {4, 10 * MiB - 1, 10 * MiB},
        {4, 10 * MiB, 10 * MiB},
        {4, 10 * MiB + 1, 12 * MiB},
        {4, 12845056, 14 * MiB}, // 12.25 MiB (16x64x56x56 fp32) -> 14 MiB
        {4, 20 * MiB, 20 * MiB}, // floor 16 MiB, step 4 MiB: on a step
        {4, 20 * MiB + 1, 24 * MiB},
        {4, 51380224, 56 * MiB},                               // 49 MiB (16x64x112x112 fp32): floor 32, step 8
        {4, 300 * MiB, 320 * MiB},                             // floor 256 MiB, step 64 MiB
        {4, (std::size_t{5} << 30) + 1, std::size_t{6} << 30}, // floor 4 GiB, step 1 GiB
        // 8 divisions: guard 4096 B.
        {8, 4096, 4096},
        {8, 4097, 4608},             // floor 4096, step 512
        {8, MiB + 1, MiB + MiB / 8}, // floor 1 MiB, step 128 KiB
        {8, 10 * MiB + 1, 11 * MiB}, // floor 8 MiB, step 1 MiB
        {8, 20 * MiB + 1, 22 * MiB}, // floor 16 MiB, step 2 MiB
        // 16 divisions: guard 8192 B.
        {16, 8192, 8192},
        {16, 8193, 8704},              // floor 8192, step 512
        {16, 5000, 5120},              // <= 8192: plain 512 rounding
        {16, MiB + 1, MiB + MiB / 16}, // floor 1 MiB, step 64 KiB
        {16, 20 * MiB + 1, 21 * MiB},  // floor 16 MiB, step 1 MiB
    };
    for (const Case& k : cases) {
        INFO("divisions " << k.divisions << ", size " << k.size);
        CHECK(round_size(all_divisions(k.divisions), k.size) == k.rounded);
    }
}

TEST_CASE("round_size with a list: each interval its own divisions", "[rounding]") {
    std::vector<std::string> w;
    // PyTorch's test vector (AllocatorConfig_test.cpp): 64:8 also fills below 64 MiB.
    const AllocConf c = parse_alloc_conf("roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]", &w);
    CHECK(w.empty());
    CHECK(round_size(c, MiB + 1) == MiB + MiB / 8);           // entry 0 (from 64:8): 8 divisions
    CHECK(round_size(c, 100 * MiB) == 104 * MiB);             // [64, 128) MiB: 8 -> step 8 MiB
    CHECK(round_size(c, 130 * MiB) == 192 * MiB);             // [128, 256): 2 -> step 64 MiB
    CHECK(round_size(c, 300 * MiB) == 320 * MiB);             // [256, 512): 4 -> step 64 MiB
    CHECK(round_size(c, 600 * MiB) == 768 * MiB);             // [512, 1024): 2 -> step 256 MiB
    CHECK(round_size(c, 1100 * MiB) == 1280 * MiB);           // [1024, 2048): 4 -> step 256 MiB
    CHECK(round_size(c, 3000 * MiB + 1) == 3000 * MiB + 512); // '>' gives 1: plain rounding
    // An interval no key names keeps 0 (PyTorch's [128:8,256:16,512:1,2048:8,>:2] vector).
    const AllocConf d = parse_alloc_conf("roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]", &w);
    CHECK(w.empty());
    CHECK(round_size(d, 1100 * MiB + 1) == 1100 * MiB + 512); // [1024, 2048): 0
    CHECK(round_size(d, 2100 * MiB) == 2304 * MiB);           // [2048, 4096): 8 -> step 256 MiB
    CHECK(round_size(d, 5000 * MiB) == 6144 * MiB);           // [4096, ...): 2 -> step 2 GiB
    CHECK(round_size(d, 300 * MiB) == 304 * MiB);             // [256, 512): 16 -> step 16 MiB
}
