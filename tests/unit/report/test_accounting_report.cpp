// SPDX-License-Identifier: MIT
// report/accounting_report and the OOM entries: the readings over time as columns (a bucket first
// seen later keeps the report's order), what the device held at an OOM in the .txt and the JSON
// (the driver's used figure split, PyTorch's blocks by kind), and the kinds' timeline in the JSON.
#include "fake_symbolizer.hpp"
#include "report/accounting_report.hpp"
#include "report/device_json.hpp"
#include "report/json_report.hpp"
#include "report/text_report.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace gpumemprof;
using namespace gpumemprof::report;

namespace {

constexpr std::int64_t MiB = 1 << 20;

AccountingMoment moment(std::int64_t t, std::int64_t used, std::vector<std::pair<std::string, std::int64_t>> b) {
    AccountingMoment m;
    m.t_ns = t;
    m.driver_used = used;
    m.driver_total = 1024 * MiB;
    m.buckets = std::move(b);
    return m;
}

/// One device, two OOMs of the program's line; the first one's split is known.
struct OomFixture {
    test::FakeSymbolizer sym;
    ReportInput in;
    StackReport stacks;

    OomFixture() {
        sym.add(0x100, "main", "/src/app.cpp", 10);
        sym.add(0x200, "train(int)", "/src/app.cpp", 20);
        in.pid = 1;
        DeviceSummary d;
        d.device = 0;
        d.context = 0;
        in.devices.push_back(d);
        for (std::uint64_t seq = 1; seq <= 2; ++seq) {
            stacks::OomRecord oom;
            oom.device = 0;
            oom.info.requested = 32 * MiB;
            oom.frames = {0x200, 0x100};
            oom.seq = seq;
            stacks.data.ooms.push_back(oom);
        }
        OomSplit s;
        s.oom = 1;
        s.device = 0;
        s.has_accounting = true;
        // 80 MiB used: 48 allocated + 24 cached + 8 unexplained (10%).
        s.accounting = moment(500000000, 80 * MiB,
                              {{"PyTorch's caching allocator: allocated", 48 * MiB},
                               {"PyTorch's caching allocator: cached, free", 24 * MiB}});
        s.kinds = {
            {"parameters", 16 * MiB}, {"gradients", 16 * MiB}, {"optimizer state", 0},    {"activations", 12 * MiB},
            {"temporaries", 4 * MiB}, {"private pools", 0},    {"library workspaces", 0}, {"other", 0}};
        in.oom_splits.push_back(s);
        stacks.resolved = resolve_report(stacks.data, sym, parse_skip_list(nullptr));
        stacks.ok = true;
    }
};

} // namespace

TEST_CASE("accounting columns: one per bucket in the report's order, 0 where a reading had none") {
    const std::vector<AccountingMoment> h = {
        moment(1, 20 * MiB, {{"cached", 20 * MiB}}),
        moment(2, 42 * MiB, {{"allocated", 18 * MiB}, {"cached", 24 * MiB}}),
        moment(3, 22 * MiB, {{"allocated", 10 * MiB}, {"cached", 10 * MiB}, {"VMM", 2 * MiB}}),
    };
    const AccountingColumns c = accounting_columns(h);
    CHECK(c.names == std::vector<std::string>{"allocated", "cached", "VMM"});
    CHECK(c.columns == std::vector<std::vector<std::int64_t>>{
                           {0, 18 * MiB, 10 * MiB}, {20 * MiB, 24 * MiB, 10 * MiB}, {0, 0, 2 * MiB}});

    DeviceAccountingSummary a;
    a.device = 0;
    a.has_peak = true;
    a.peak = h[1];
    a.readings = 3;
    a.history = h;
    util::JsonWriter w;
    w.begin_object();
    write_accounting_json(w, a, StackReport{});
    w.end_object();
    // 42 MiB = 44040192; unexplained: 20-20, 42-42, 22-22.
    CHECK(w.str().find("\"readings\":3,\"driver_calls_measured\":0,\"timeline\":{\"t_ns\":[1,2,3],"
                       "\"driver_used_bytes\":[20971520,44040192,23068672],\"unexplained_bytes\":[0,0,0],"
                       "\"buckets\":{\"allocated\":[0,18874368,10485760],\"cached\":[20971520,25165824,10485760],"
                       "\"VMM\":[0,0,2097152]}}") != std::string::npos);
}

TEST_CASE("an OOM in the .txt: the driver's used figure split and PyTorch's blocks by kind") {
    OomFixture f;
    const std::string txt = text_report(f.in, f.stacks.data, f.stacks.resolved);
    const auto first = txt.find("OOM #1 on device 0");
    const auto second = txt.find("OOM #2 on device 0");
    REQUIRE(first != std::string::npos);
    REQUIRE(second != std::string::npos);
    const std::string one = txt.substr(first, second - first);
    CHECK(one.find("\n  device memory at the OOM (0.500 s): the driver counts 80.00 MiB (83886080 bytes) used of "
                   "1024.00 MiB\n"
                   "    48.00 MiB (50331648 bytes)  PyTorch's caching allocator: allocated\n"
                   "    24.00 MiB (25165824 bytes)  PyTorch's caching allocator: cached, free\n"
                   "    8.00 MiB (8388608 bytes)  unexplained (10.00%;") != std::string::npos);
    CHECK(one.find("\n  PyTorch's live blocks by kind at the OOM (48.00 MiB (50331648 bytes)): parameters 16.00 MiB "
                   "(16777216 bytes); gradients 16.00 MiB (16777216 bytes); activations 12.00 MiB (12582912 bytes); "
                   "temporaries 4.00 MiB (4194304 bytes); other 0 bytes (0 bytes);\n") != std::string::npos);
    // The second OOM's split is not known: its entry has neither.
    const std::string two = txt.substr(second);
    CHECK(two.find("device memory at the OOM") == std::string::npos);
    CHECK(two.find("by kind at the OOM") == std::string::npos);
}

TEST_CASE("an OOM in the JSON: device_accounting and memory_kinds") {
    OomFixture f;
    const std::string js = json_report(f.in, f.stacks);
    const auto first = js.find("\"ooms\":[{");
    REQUIRE(first != std::string::npos);
    CHECK(js.find("\"device_accounting\":{\"driver_used_bytes\":83886080,\"driver_total_bytes\":1073741824,"
                  "\"t_s\":0.5,\"buckets\":{\"PyTorch's caching allocator: allocated\":50331648,"
                  "\"PyTorch's caching allocator: cached, free\":25165824},\"by_library\":{},"
                  "\"unexplained_bytes\":8388608},\"memory_kinds\":{\"parameters\":16777216,\"gradients\":16777216,"
                  "\"optimizer state\":0,\"activations\":12582912,\"temporaries\":4194304,\"private pools\":0,"
                  "\"library workspaces\":0,\"other\":0},\"frames\":",
                  first) != std::string::npos);
    // One split for two OOMs.
    const auto a = js.find("\"device_accounting\"", first);
    CHECK(js.find("\"device_accounting\"", a + 1) == std::string::npos);
}

TEST_CASE("memory_kinds.timeline: the time and each kind's bytes as columns; the rules' work") {
    DeviceSummary d;
    d.allocator = "pytorch";
    d.kinds_at_peak = {{"parameters", 4}, {"gradients", 4}};
    d.kinds_now = {{"parameters", 4}, {"gradients", 0}};
    d.kind_t_ns = {5, 9, 12};
    d.kind_points = {{4, 0}, {4, 4}, {4, 0}};
    d.kind_changes = 7;
    d.kind_phase_changes = 6;
    d.kind_survivor_checks = 40;
    d.kind_survivors = 3;
    d.kind_points_moved = 9;
    util::JsonWriter w;
    w.begin_object();
    write_allocator(w, d);
    w.end_object();
    CHECK(w.str().find("\"memory_kinds\":{\"at_peak\":{\"parameters\":4,\"gradients\":4},"
                       "\"now\":{\"parameters\":4,\"gradients\":0},\"timeline\":{\"changes\":7,\"slot_ns\":0,"
                       "\"t_ns\":[5,9,12],\"bytes\":{\"parameters\":[4,4,4],\"gradients\":[0,4,0]}},"
                       "\"rules\":{\"phase_changes\":6,\"survivor_checks\":40,\"survivors\":3,"
                       "\"timeline_points_moved\":9}}") != std::string::npos);
}
