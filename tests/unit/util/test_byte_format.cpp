// SPDX-License-Identifier: MIT
// util::parse_size: the sizes a user writes on the command line (`replay --capacity`).
#include "util/byte_format.hpp"

#include <catch2/catch.hpp>

#include <cstdint>

using gpumemprof::util::parse_size;

TEST_CASE("parse_size reads bytes and K/M/G/T suffixes as powers of 1024, in any case") {
    std::uint64_t v = 0;
    CHECK((parse_size("4096", &v) && v == 4096));
    CHECK((parse_size("4096B", &v) && v == 4096));
    CHECK((parse_size("512KiB", &v) && v == 524288));
    CHECK((parse_size("1536M", &v) && v == 1610612736));
    CHECK((parse_size("80G", &v) && v == 85899345920));
    CHECK((parse_size("2t", &v) && v == 2199023255552));
    CHECK((parse_size("3mb", &v) && v == 3145728));
    CHECK((parse_size("0", &v) && v == 0));
}

TEST_CASE("parse_size refuses what is not a size, and sizes past 64 bits") {
    std::uint64_t v = 7;
    CHECK_FALSE(parse_size("", &v));
    CHECK_FALSE(parse_size("G", &v));
    CHECK_FALSE(parse_size("-1", &v));
    CHECK_FALSE(parse_size(" 1", &v));
    CHECK_FALSE(parse_size("1.5G", &v));
    CHECK_FALSE(parse_size("10X", &v));
    CHECK_FALSE(parse_size("1P", &v));
    CHECK_FALSE(parse_size("18446744073709551616", &v)); // 2^64
    CHECK_FALSE(parse_size("16777216T", &v));            // 2^24 TiB = 2^64 bytes
    CHECK(v == 7);                                       // untouched
    CHECK((parse_size("16777215T", &v) && v == 18446742974197923840ull));
    CHECK((parse_size("18446744073709551615", &v) && v == UINT64_MAX));
}
