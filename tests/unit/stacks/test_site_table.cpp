// SPDX-License-Identifier: MIT
// Site table: live/total/acquired counters and live-at-global-peak attribution on hand-made
// event sequences (expected values worked out in the comments).
#include "stacks/site_table.hpp"

#include <catch2/catch.hpp>

using gpumemprof::stacks::SiteTable;

TEST_CASE("site table: peak attribution is each site's live bytes when the total peaked", "[site_table]") {
    SiteTable t;
    t.on_alloc(0, 0x1000, 100, 90, 1);  // total 100 -> peak 100
    t.on_alloc(0, 0x2000, 50, 50, 2);   // total 150 -> peak 150
    t.on_free(0, 0x1000);               // total 50
    t.on_alloc(0, 0x3000, 200, 199, 3); // total 250 -> peak 250: site1 0, site2 50, site3 200
    t.on_free(0, 0x3000);               // total 50
    t.on_alloc(0, 0x4000, 150, 150, 1); // total 200 < 250: no new peak
    t.on_free(0, 0x2000);               // total 150

    CHECK(t.peak_bytes() == 250);
    CHECK(t.live_bytes() == 150);
    CHECK(t.site(1).peak_live_bytes == 0);
    CHECK(t.site(2).peak_live_bytes == 50);
    CHECK(t.site(3).peak_live_bytes == 200);
    CHECK(t.site(3).peak_live_count == 1);
    // Current and total values.
    CHECK(t.site(1).live_bytes == 150);
    CHECK(t.site(1).live_count == 1);
    CHECK(t.site(1).total_bytes == 250); // 100 + 150
    CHECK(t.site(1).total_count == 2);
    CHECK(t.site(1).requested_bytes == 240); // 90 + 150
    CHECK(t.site(2).live_bytes == 0);
    CHECK(t.site(3).live_bytes == 0);

    // A later, higher peak replaces the attribution: total 150 + 300 = 450 with
    // site1 150 (0x4000), site2 300 (0x5000), site3 0.
    t.on_alloc(1, 0x5000, 300, 300, 2);
    t.on_free(0, 0x4000);
    t.on_free(1, 0x5000);
    CHECK(t.peak_bytes() == 450);
    CHECK(t.site(1).peak_live_bytes == 150);
    CHECK(t.site(2).peak_live_bytes == 300);
    CHECK(t.site(3).peak_live_bytes == 0);
    CHECK(t.live_bytes() == 0);
}

TEST_CASE("site table: the peak is the first moment the maximum is reached", "[site_table]") {
    SiteTable t;
    t.on_alloc(0, 0xa, 100, 100, 1); // peak 100 with site1 = 100
    t.on_free(0, 0xa);
    t.on_alloc(0, 0xb, 100, 100, 2); // reaches 100 again: not a new peak
    CHECK(t.peak_bytes() == 100);
    CHECK(t.site(1).peak_live_bytes == 100);
    CHECK(t.site(2).peak_live_bytes == 0);
}

TEST_CASE("site table: sites untouched since the peak and sites changed after it", "[site_table]") {
    SiteTable t;
    t.on_alloc(0, 0x10, 10, 10, 7); // 10, peak
    t.on_alloc(0, 0x20, 20, 20, 8); // 30, peak: s7 10, s8 20
    // s7 grows after the peak twice and shrinks once, never reaching a new total maximum:
    t.on_free(0, 0x20);             // 10
    t.on_alloc(0, 0x30, 15, 15, 7); // 25
    t.on_alloc(0, 0x40, 4, 4, 7);   // 29 < 30
    CHECK(t.peak_bytes() == 30);
    CHECK(t.site(7).peak_live_bytes == 10);
    CHECK(t.site(7).live_bytes == 29);
    CHECK(t.site(8).peak_live_bytes == 20);
    // Now 2 more bytes from s8: 31 is a new peak made of s7 29 + s8 2.
    t.on_alloc(0, 0x50, 2, 2, 8);
    CHECK(t.peak_bytes() == 31);
    CHECK(t.site(7).peak_live_bytes == 29);
    CHECK(t.site(8).peak_live_bytes == 2);
}

TEST_CASE("site table: acquired bytes, at the peak and in total", "[site_table]") {
    SiteTable t;
    t.on_acquire(0, 2097152, 1);       // a 2 MiB segment for site 1
    t.on_alloc(0, 0x100, 512, 100, 1); // peak 512 (acquired so far: site1 2 MiB)
    t.on_free(0, 0x100);
    t.on_acquire(0, 20971520, 2);      // a 20 MiB segment for site 2, after the peak
    t.on_alloc(0, 0x200, 512, 512, 2); // 512 again: not a new peak
    CHECK(t.site(1).acquired_bytes == 2097152);
    CHECK(t.site(1).peak_acquired_bytes == 2097152);
    CHECK(t.site(2).acquired_bytes == 20971520);
    CHECK(t.site(2).peak_acquired_bytes == 0);
    CHECK(t.site(2).acquire_count == 1);
}

TEST_CASE("site table: unknown frees, reused addresses, devices and fork reset", "[site_table]") {
    SiteTable t;
    t.on_free(0, 0xdead); // never allocated
    gpumemprof::stacks::ReportData d;
    t.collect(&d);
    CHECK(d.unknown_frees == 1);
    CHECK(d.live_bytes == 0);

    t.on_alloc(0, 0x1, 64, 64, 1);
    t.on_alloc(1, 0x2, 128, 128, 1);
    t.on_alloc(1, 0x1, 32, 32, 2); // 0x1 handed out again without a free: the old block retires
    // live: 0x2 (128, dev1) + 0x1 (32, dev1) = 160; peak was 192 = 64 (dev0) + 128 (dev1).
    t.collect(&d);
    CHECK(d.live_bytes == 160);
    CHECK(d.live_count == 2);
    CHECK(d.peak_bytes == 192);
    REQUIRE(d.device_live_at_peak.size() == 2);
    CHECK(d.device_live_at_peak[0] == 64);
    CHECK(d.device_live_at_peak[1] == 128);
    CHECK(t.site(1).live_bytes == 128);

    t.clear(); // a forked child: nothing of the parent's stays
    t.collect(&d);
    CHECK(d.live_bytes == 0);
    CHECK(d.peak_bytes == 0);
    CHECK(d.sites.empty());
    CHECK(d.live_blocks.empty());
    CHECK(d.events == 0);
    CHECK(t.site(1).total_bytes == 0);
    t.on_free(1, 0x2); // forgotten in the child
    t.on_alloc(0, 0x3, 256, 200, 2);
    t.collect(&d);
    CHECK(d.unknown_frees == 1);
    REQUIRE(d.sites.size() == 1);
    CHECK(d.sites[0].counters.total_bytes == 256);
    CHECK(d.peak_bytes == 256);
}

TEST_CASE("site table: many blocks in and out keep exact totals", "[site_table]") {
    SiteTable t;
    // 10000 blocks of 512 bytes across 10 sites, then free the even ones.
    for (std::uintptr_t i = 0; i < 10000; ++i)
        t.on_alloc(0, 0x100000 + i * 512, 512, 500, static_cast<std::uint32_t>(i % 10));
    for (std::uintptr_t i = 0; i < 10000; i += 2)
        t.on_free(0, 0x100000 + i * 512);
    // Peak 10000 * 512 = 5120000; live 5000 * 512 = 2560000; site 3 (odd) keeps all 1000 blocks,
    // site 4 (even) none.
    CHECK(t.peak_bytes() == 5120000);
    CHECK(t.live_bytes() == 2560000);
    CHECK(t.site(3).live_count == 1000);
    CHECK(t.site(4).live_count == 0);
    CHECK(t.site(4).peak_live_bytes == 512000);
}

TEST_CASE("site table: sampled allocations count with their weight, unsampled ones in no site", "[site_table]") {
    gpumemprof::stacks::SiteTable t;
    // Site 7: two sampled 1000-byte blocks standing for 8 each, one exact 4096-byte block.
    t.on_alloc(0, 0x1000, 1000, 900, 7, 8);
    t.on_alloc(0, 0x2000, 1000, 900, 7, 8);
    t.on_alloc(0, 0x3000, 4096, 4096, 7, 1);
    // An unsampled block: in the totals, in no site.
    t.on_alloc(0, 0x4000, 500, 500, 0, 0);
    CHECK(t.live_bytes() == 1000 + 1000 + 4096 + 500);
    CHECK(t.peak_bytes() == 6596);
    auto s = t.site(7);
    CHECK(s.live_bytes == 8 * 1000 + 8 * 1000 + 4096);
    CHECK(s.live_count == 17);
    CHECK(s.total_bytes == 20096);
    CHECK(s.requested_bytes == 8 * 900 * 2 + 4096);
    CHECK(t.site(0).total_count == 0);
    // Frees take off what the block added.
    CHECK(t.on_free(0, 0x1000) == 7);
    CHECK(t.on_free(0, 0x4000) == 0);
    s = t.site(7);
    CHECK(s.live_bytes == 8 * 1000 + 4096);
    CHECK(s.live_count == 9);
    CHECK(s.peak_live_bytes == 20096); // as of the peak (all four live)
    CHECK(t.live_bytes() == 1000 + 4096);
    gpumemprof::stacks::ReportData d;
    t.collect(&d);
    REQUIRE(d.sites.size() == 1); // no site for the unsampled block
    CHECK(d.live_blocks.size() == 2);
}
