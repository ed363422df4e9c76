// SPDX-License-Identifier: MIT
// tools/run_summary, report_sax, site_key, diff: what merge and diff read from a report.
#include "tools/diff.hpp"
#include "tools/run_summary.hpp"
#include "tools/site_key.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace gpumemprof::tools;

namespace {

constexpr const char* kAllocFrame = R"({"function":"c10::cuda::CUDACachingAllocator::Native::malloc","file":"",)"
                                    R"("line":0,"module":"libc10_cuda.so","offset":16,"kind":"native"})";
constexpr const char* kUserFrame =
    R"({"function":"forward","file":"model.py","line":57,"module":"","offset":0,"kind":"python"})";
constexpr const char* kMainFrame =
    R"({"function":"main","file":"train.py","line":9,"module":"","offset":0,"kind":"python"})";

/// A report with two sites at the same user line (model.py:57) and one elsewhere, frames root
/// first as the library writes them.
std::string inline_report() {
    return std::string(R"({"version":1,"pid":7,"host":"n1","exe":"python","rank":3,"local_rank":1,)") +
           R"("world_size":8,"rank_from":"SLURM_PROCID","cuda_visible_devices":"3","start_time_ns":5000,)" +
           R"("steps":[{"step":0,"t_ns":100,"devices":[{"device":0,"allocated":10,"reserved":20}]},)" +
           R"({"step":1,"t_ns":300,"devices":[{"device":0,"allocated":30,"reserved":40}]}],"steps_dropped":0,)" +
           R"("seconds_profiled":0.5,"devices":[{"device":0,"memory_stats":{"allocated_bytes.all.peak":900,)" +
           R"("reserved_bytes.all.peak":1000,"num_ooms":2},"pytorch_model":{"memory_stats":)" +
           R"({"allocated_bytes.all.peak":1}},"timeline":{"points_cover_ns":0,"peak_allocated_t_ns":250,)" +
           R"("reserved_at_peak_allocated":960,"t_ns":[0,200,350],"allocated":[10,70,50],"reserved":[20,60,45],)" +
           R"("ooms":[{"t_ns":260,"bytes":4096}]}}],"sites":[)" + "{\"frames\":[" + kMainFrame + "," + kUserFrame +
           "," + kAllocFrame + R"(],"peak_live_bytes":100,"total_bytes":1000},)" + "{\"frames\":[" + kUserFrame + "," +
           kAllocFrame + R"(],"peak_live_bytes":50,"total_bytes":500},)" + "{\"frames\":[" + kMainFrame +
           R"(],"peak_live_bytes":7,"total_bytes":70}],)" +
           R"("peak":{"bytes":1,"devices":[{"device":5,"bytes":1}],"sites":[{"site":0,"bytes":3}]},"ooms":[]})";
}

/// The same sites through a top-level frame table (after the sites), and one with a user_frame.
std::string table_report() {
    return std::string(R"({"version":1,"devices":[{"device":1,"memory_stats":{"allocated_bytes.all.peak":5}}],)") +
           R"("sites":[{"frames":[2,1,0],"peak_live_bytes":100,"total_bytes":1000},)" +
           R"({"frames":[1,0],"peak_live_bytes":50,"total_bytes":500},)" +
           R"({"frames":[2],"peak_live_bytes":7,"total_bytes":70},)" +
           R"({"frames":[2,0],"user_frame":1,"peak_live_bytes":3,"total_bytes":30}],)" + "\"frames\":[" + kAllocFrame +
           "," + kUserFrame + "," + kMainFrame + "]}";
}

} // namespace

TEST_CASE("a report's figures, rank fields, timeline and steps are read by value") {
    SiteKeys keys;
    RunSummary r;
    std::string error;
    REQUIRE(summary_from_report(inline_report(), keys, &r, &error));
    REQUIRE((r.pid == 7 && r.host == "n1" && r.rank == 3 && r.local_rank == 1 && r.world_size == 8));
    REQUIRE((r.rank_from == "SLURM_PROCID" && r.cuda_visible_devices == "3" && r.start_time_ns == 5000));
    REQUIRE(r.devices.size() == 1); // the "peak" section's devices are not devices
    const DeviceRun& d = r.devices[0];
    REQUIRE((d.peak_allocated == 900 && d.peak_reserved == 1000 && d.ooms == 2)); // not the model's
    REQUIRE((d.peak_allocated_t_ns == 250 && d.reserved_at_peak == 960));
    REQUIRE(d.timeline.size() == 3);
    REQUIRE((d.timeline[1].t_ns == 200 && d.timeline[1].allocated == 70 && d.timeline[1].reserved == 60));
    REQUIRE((d.oom_marks.size() == 1 && d.oom_marks[0].t_ns == 260 && d.oom_marks[0].bytes == 4096));
    REQUIRE(r.steps.size() == 2);
    REQUIRE((r.steps[1].step == 1 && r.steps[1].t_ns == 300 && r.steps[1].devices[0].allocated == 30));
    // Sites by user line: the allocator frame is plumbing; the two model.py:57 sites add up.
    REQUIRE(r.has_sites);
    REQUIRE(r.sites.size() == 2);
    REQUIRE(r.sites[0].first == "model.py:57:forward");
    REQUIRE((r.sites[0].second.at_peak == 150 && r.sites[0].second.total == 1500));
    REQUIRE(r.sites[1].first == "train.py:9:main");
    REQUIRE(r.sites[1].second.at_peak == 7);
}

TEST_CASE("sites through a frame table, and a user_frame wins over the innermost frame") {
    SiteKeys keys;
    RunSummary r;
    std::string error;
    REQUIRE(summary_from_report(table_report(), keys, &r, &error));
    REQUIRE(r.sites.size() == 2);
    REQUIRE(r.sites[0].first == "model.py:57:forward");
    REQUIRE(r.sites[0].second.at_peak == 153); // 100 + 50 + 3 (its user_frame, not train.py)
    REQUIRE(r.sites[1].first == "train.py:9:main");
    REQUIRE(r.sites[1].second.at_peak == 7);
}

TEST_CASE("site keys: file:line:function, module:function, module+offset; all hidden: the innermost") {
    SiteKeys keys;
    gpumemprof::report::SymbolFrame native{"at::native::relu", "", 0, "libtorch_cpu.so", 0x1234, false};
    gpumemprof::report::SymbolFrame bare{"", "", 0, "libfoo.so", 0x1f0, false};
    gpumemprof::report::SymbolFrame alloc{
        "c10::cuda::CUDACachingAllocator::Native::malloc", "", 0, "libc10_cuda.so", 0x10, false};
    REQUIRE(frame_key(native) == "libtorch_cpu.so:at::native::relu");
    REQUIRE(frame_key(bare) == "libfoo.so+0x1f0");
    REQUIRE(keys.site_key(nullptr, {&alloc, &native}) == "libtorch_cpu.so:at::native::relu");
    REQUIRE(keys.site_key(nullptr, {&alloc}) == "libc10_cuda.so:c10::cuda::CUDACachingAllocator::Native::malloc");
    REQUIRE(keys.site_key(nullptr, {}) == "(no stack)");
    REQUIRE(keys.site_key(&bare, {&native}) == "libfoo.so+0x1f0");
}

TEST_CASE("not a report: malformed JSON has its byte offset, a JSON without devices is refused") {
    SiteKeys keys;
    RunSummary r;
    std::string error;
    REQUIRE_FALSE(summary_from_report(R"({"version":1,"devices":[)", keys, &r, &error));
    REQUIRE(error.rfind("not valid JSON at byte 25", 0) == 0);
    RunSummary r2;
    REQUIRE_FALSE(summary_from_report(R"({"version":1,"sites":[]})", keys, &r2, &error));
    REQUIRE(error == "not a gpumemprof report (no \"version\" and \"devices\")");
}

TEST_CASE("a partial merge line reads back as the run it was written from (sites at the peak only)") {
    SiteKeys keys;
    RunSummary r;
    std::string error;
    REQUIRE(summary_from_report(inline_report(), keys, &r, &error));
    r.file = "rank3.json";
    char path[] = "/tmp/gpumemprof-partial-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    ::close(fd);
    {
        std::ofstream out(path);
        out << kPartialHeader << "\n" << partial_line(r) << "\n" << partial_line(r) << "\n";
    }
    std::vector<RunSummary> back;
    REQUIRE(read_partial(
        path, [&](RunSummary&& x) { back.push_back(std::move(x)); }, &error));
    std::remove(path);
    REQUIRE(back.size() == 2);
    const RunSummary& b = back[1];
    REQUIRE((b.file == "rank3.json" && b.rank == 3 && b.world_size == 8 && b.start_time_ns == 5000));
    REQUIRE((b.devices[0].peak_allocated == 900 && b.devices[0].reserved_at_peak == 960 && b.devices[0].ooms == 2));
    REQUIRE((b.devices[0].timeline.size() == 3 && b.devices[0].timeline[2].reserved == 45));
    REQUIRE((b.devices[0].oom_marks.size() == 1 && b.devices[0].oom_marks[0].bytes == 4096));
    REQUIRE(b.sites.size() == 2);
    REQUIRE((b.sites[0].first == "model.py:57:forward" && b.sites[0].second.at_peak == 150));
}

TEST_CASE("steps of a report: the timeline points overlapping each step, and what was held at its mark") {
    SiteKeys keys;
    RunSummary r;
    std::string error;
    REQUIRE(summary_from_report(inline_report(), keys, &r, &error));
    DiffSide a, b;
    REQUIRE(steps_of_report(r, 0, 1, &a, &b, &error));
    // Step 0 is [100, 300): points from 0 (10, held until 200) and from 200 (70): peak 70.
    // Step 1 is [300, end): the point from 200 (70, until 350) and from 350 (50): 70 too.
    REQUIRE((a.peak_allocated == 70 && a.peak_reserved == 60 && a.allocated_at_start == 10));
    REQUIRE((b.peak_allocated == 70 && b.peak_reserved == 60 && b.allocated_at_start == 30));
    REQUIRE_FALSE(steps_of_report(r, 0, 5, &a, &b, &error));
    REQUIRE(error == "step 5 is not among the report's steps");
}

TEST_CASE("the gate: more than PCT percent") {
    REQUIRE_FALSE(peak_grew(100, 105, 5));
    REQUIRE(peak_grew(100, 106, 5));
    REQUIRE_FALSE(peak_grew(100, 90, 0));
    REQUIRE(peak_grew(0, 1, 1000));
    REQUIRE_FALSE(peak_grew(0, 0, 0));
    REQUIRE(peak_grew(1000000000000, 1000000000001, 0)); // one byte over, 0%: no rounding away
}
