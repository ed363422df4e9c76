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
