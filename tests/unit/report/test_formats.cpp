// SPDX-License-Identifier: MIT
// Report formatting on synthetic data with fake symbol names: byte formats, frame dropping and
// merging, the CuPy-style tree (both views), folded stacks, the text report and the OOM text.
#include "fake_symbolizer.hpp"
#include "report/folded_writer.hpp"
#include "report/frame_filter.hpp"
#include "report/html_report.hpp"
#include "report/json_report.hpp"
#include "report/line_profile.hpp"
#include "report/oom_advice.hpp"
#include "report/reports.hpp"
#include "report/resolved_stacks.hpp"
#include "report/text_report.hpp"
#include "util/byte_format.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace gpumemprof;
using namespace gpumemprof::report;

TEST_CASE("byte formats: CuPy humanised and PyTorch format_size", "[report]") {
    CHECK(util::cupy_size(0) == "0.00B");
    CHECK(util::cupy_size(512) == "512.00B");
    CHECK(util::cupy_size(1023) == "1023.00B");
    CHECK(util::cupy_size(1024) == "1.00KB");
    CHECK(util::cupy_size(4096) == "4.00KB");
    CHECK(util::cupy_size(1572864) == "1.50MB");    // 1.5 * 2^20
    CHECK(util::cupy_size(3221225472) == "3.00GB"); // 3 * 2^30
    CHECK(util::torch_size(1024) == "1024 bytes");
    CHECK(util::torch_size(1025) == "1.00 KiB");
    CHECK(util::torch_size(1048576) == "1024.00 KiB"); // exactly 1 MiB stays in KiB
    CHECK(util::torch_size(2097152) == "2.00 MiB");
    CHECK(util::torch_size(1073741824) == "1024.00 MiB");
    CHECK(util::torch_size(-5) == "-5 bytes");
    CHECK(util::torch_size_exact(2097152) == "2.00 MiB (2097152 bytes)");
    // The CLI's tables: IEC units up to TiB, negative differences scaled too.
    CHECK(util::iec_size(512) == "512 B");
    CHECK(util::iec_size(1024) == "1.00 KiB");
    CHECK(util::iec_size(-3758096384) == "-3.50 GiB");
    CHECK(util::iec_size(std::int64_t{5} << 50) == "5120.00 TiB");
    CHECK(util::torch_size(3221225472) == "3.00 GiB");
}

TEST_CASE("skip list parsing", "[report]") {
    CHECK(parse_skip_list(nullptr) ==
          std::vector<std::string>{"libgpumemprof", "libcudart", "libcuda.so", "ld-linux", "libdl"});
    CHECK(parse_skip_list("a, b,,c ") == std::vector<std::string>{"a", "b", "c"});
    CHECK(parse_skip_list("").empty());
}

namespace {

test::FakeSymbolizer make_symbols() {
    test::FakeSymbolizer s;
    s.add(0x100, "main", "/src/app.cpp", 10);
    s.add(0x200, "train(int)", "/src/app.cpp", 20);
    s.add(0x300, "alloc_a()", "/src/app.cpp", 30);
    s.add(0x400, "alloc_b()", "/src/app.cpp", 40);
    // 0x410: code of `fill` inlined into alloc_b at app.cpp:41 (innermost first).
    s.add(0x410, "fill(void*)", "/src/app.hpp", 5);
    s.add(0x410, "alloc_b()", "/src/app.cpp", 41);
    s.add(0x900, "cuMemAlloc_v2", "", 0, "libgpumemprof.so");
    s.add(0x901, "gpumemprof::core::on_alloc()", "", 0, "libgpumemprof.so");
    s.add(0x950, "cudaMalloc", "", 0, "libcudart.so.12");
    return s;
}

stacks::SiteData site(stacks::StackId id, std::vector<std::uintptr_t> frames, std::int64_t total, std::int64_t acquired,
                      std::int64_t peak, std::int64_t peak_acq, std::int64_t live) {
    stacks::SiteData s;
    s.id = id;
    s.frames = std::move(frames);
    s.counters.total_bytes = total;
    s.counters.total_count = 1;
    s.counters.acquired_bytes = acquired;
    s.counters.peak_live_bytes = peak;
    s.counters.peak_live_count = peak > 0 ? 1 : 0;
    s.counters.peak_acquired_bytes = peak_acq;
    s.counters.live_bytes = live;
    s.counters.live_count = live > 0 ? 1 : 0;
    return s;
}

stacks::ReportData make_data() {
    stacks::ReportData d;
    // site 1: alloc_a via cudart and the hook; 3 MiB total, 20 MiB acquired, 2 MiB at peak,
    // 1 MiB leaked.
    d.sites.push_back(site(1, {0x900, 0x950, 0x300, 0x200, 0x100}, 3145728, 20971520, 2097152, 20971520, 1048576));
    // site 2: alloc_b line 40; 1 MiB total, 512 KiB at peak.
    d.sites.push_back(site(2, {0x900, 0x400, 0x200, 0x100}, 1048576, 0, 524288, 0, 0));
    // site 3: the inlined fill() in alloc_b line 41; 512 B total, acquired 2 MiB after the peak.
    d.sites.push_back(site(3, {0x410, 0x200, 0x100}, 512, 2097152, 0, 0, 512));
    d.peak_bytes = 2621440;
    d.live_bytes = 1049088;
    d.live_count = 2;
    return d;
}

/// A folded file's text, written as the dump writes it (write_folded), into a string.
std::string folded(const ResolvedReport& r, FoldedMetric metric) {
    std::string out;
    util::StringSink sink(out);
    CHECK(write_folded(sink, r, metric));
    return out;
}

/// What prepare_stack_report makes of `data`, symbolised by `sym` instead of the process's.
StackReport stack_report(const stacks::ReportData& data, Symbolizer& sym) {
    StackReport r;
    r.data = data;
    r.resolved = resolve_report(r.data, sym, parse_skip_list(nullptr));
    r.ok = true;
    return r;
}

} // namespace

TEST_CASE("line profile tree, cumulative view, CuPy format", "[report]") {
    auto sym = make_symbols();
    auto data = make_data();
    const auto r = resolve_report(data, sym, parse_skip_list(nullptr));
    // _root used = 3145728 + 1048576 + 512 = 4194816 = 4.0005 MiB -> "4.00MB";
    // acquired = 20971520 + 2097152 = 23068672 = 22 MiB.
    const std::string expected = "_root (4.00MB, 22.00MB)\n"
                                 "  /src/app.cpp:10:main (4.00MB, 22.00MB)\n"
                                 "    /src/app.cpp:20:train(int) (4.00MB, 22.00MB)\n"
                                 "      /src/app.cpp:30:alloc_a() (3.00MB, 20.00MB)\n"
                                 "      /src/app.cpp:40:alloc_b() (1.00MB, 0.00B)\n"
                                 "      /src/app.cpp:41:alloc_b() (512.00B, 2.00MB)\n"
                                 "        /src/app.hpp:5:fill(void*) (512.00B, 2.00MB)\n";
    CHECK(line_profile_tree(r, TreeView::cumulative) == expected);
}

TEST_CASE("line profile tree, at-peak view", "[report]") {
    auto sym = make_symbols();
    auto data = make_data();
    const auto r = resolve_report(data, sym, parse_skip_list(nullptr));
    // 2 MiB + 512 KiB = 2.5 MiB live at the peak; site 3 had nothing then and is left out.
    const std::string expected = "_root (2.50MB, 20.00MB)\n"
                                 "  /src/app.cpp:10:main (2.50MB, 20.00MB)\n"
                                 "    /src/app.cpp:20:train(int) (2.50MB, 20.00MB)\n"
                                 "      /src/app.cpp:30:alloc_a() (2.00MB, 20.00MB)\n"
                                 "      /src/app.cpp:40:alloc_b() (512.00KB, 0.00B)\n";
    CHECK(line_profile_tree(r, TreeView::at_peak) == expected);
}

TEST_CASE("folded stacks: peak, total and leaked bytes", "[report]") {
    auto sym = make_symbols();
    auto data = make_data();
    const auto r = resolve_report(data, sym, parse_skip_list(nullptr));
    CHECK(folded(r, FoldedMetric::peak_live_bytes) ==
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_a() (app.cpp:30) 2097152\n"
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_b() (app.cpp:40) 524288\n");
    CHECK(folded(r, FoldedMetric::total_bytes) ==
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_a() (app.cpp:30) 3145728\n"
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_b() (app.cpp:40) 1048576\n"
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_b() (app.cpp:41);fill(void*) (app.hpp:5) 512\n");
    CHECK(folded(r, FoldedMetric::leaked_bytes) ==
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_a() (app.cpp:30) 1048576\n"
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_b() (app.cpp:41);fill(void*) (app.hpp:5) 512\n");
}

TEST_CASE("frame dropping follows the skip list; equal stacks merge", "[report]") {
    auto sym = make_symbols();
    auto data = make_data();
    // Only the profiler's module is skipped, but the cudaMalloc frame still goes: CUDA API
    // frames are dropped by name too (with static cudart they live in the program's module).
    auto r = resolve_report(data, sym, {"libgpumemprof"});
    CHECK(folded(r, FoldedMetric::peak_live_bytes) ==
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_a() (app.cpp:30) 2097152\n"
          "main (app.cpp:10);train(int) (app.cpp:20);alloc_b() (app.cpp:40) 524288\n");
    // Static cudart internals as nvcc 13 names them, inside the program's own module, go too.
    {
        stacks::ReportData d2;
        d2.sites.push_back(site(1, {0x7001, 0x7002, 0x300, 0x200, 0x100}, 4096, 0, 4096, 0, 0));
        test::FakeSymbolizer s2 = make_symbols();
        s2.add(0x7001, "libcudart_static_5382377d5c77", "", 0, "app");
        s2.add(0x7002, "cudaMalloc", "", 0, "app");
        auto r2 = resolve_report(d2, s2, parse_skip_list(nullptr));
        REQUIRE(r2.sites.size() == 1);
        CHECK(r2.frames_of(r2.sites[0].stack).back().function == "alloc_a()"); // innermost kept frame: the caller
    }
    // An empty skip list keeps the profiler's own frames (a module rule) but not cudaMalloc.
    r = resolve_report(data, sym, {});
    CHECK(folded(r, FoldedMetric::peak_live_bytes).find("cudaMalloc") == std::string::npos);
    // Site 4 differs from site 2 only in the profiler frame: after dropping it they are one site.
    data.sites.push_back(site(4, {0x901, 0x400, 0x200, 0x100}, 100, 0, 1000, 0, 0));
    r = resolve_report(data, sym, parse_skip_list(nullptr));
    REQUIRE(r.sites.size() == 3);
    CHECK(r.sites[1].counters().total_bytes == 1048676);    // 1048576 + 100
    CHECK(r.sites[1].counters().peak_live_bytes == 525288); // 524288 + 1000
    // A stack made only of skipped frames is kept whole rather than emptied.
    data.sites.push_back(site(5, {0x901, 0x900}, 64, 0, 0, 0, 0));
    r = resolve_report(data, sym, parse_skip_list(nullptr));
    REQUIRE(r.sites.size() == 4);
    CHECK(r.frames_of(r.sites[3].stack).size() == 2);
    CHECK(r.frames_of(r.sites[3].stack)[0].function == "cuMemAlloc_v2"); // root first
    // Stack not captured (id 0, no frames).
    stacks::ReportData none;
    none.sites.push_back(site(0, {}, 4096, 0, 4096, 0, 0));
    CHECK(folded(resolve_report(none, sym, {}), FoldedMetric::peak_live_bytes) == "[no stack] 4096\n");
}

TEST_CASE("OOM text in PyTorch's shape and the suggestion", "[report]") {
    pool::OomInfo info;
    info.requested = 3000000000; // asks 3e9 bytes
    info.rounded = 3000000512;
    info.allocation_size = 3000000512; // segment wanted: 2.79 GiB
    info.device_total = 8589934592;    // 8 GiB
    info.device_free = 1073741824;     // 1 GiB free: format_size prints "1024.00 MiB" (<= 1 GiB)
    info.allocated = 4294967296;       // 4 GiB allocated
    info.reserved = 6442450944;        // 6 GiB reserved -> 2 GiB reserved but unallocated
    info.largest_free_block = 536870912;
    CHECK(oom_message(0, info) ==
          "CUDA out of memory. Tried to allocate 2.79 GiB. GPU 0 has a total capacity of 8.00 GiB of which "
          "1024.00 MiB is free. Of the allocated memory 4.00 GiB is allocated by the pool, and 2.00 GiB is reserved "
          "by the pool but unallocated. The largest free cached block is 512.00 MiB. The program asked for "
          "3000000000 bytes (rounded to 3000000512).");
    // 2 GiB unallocated + 1 GiB free >= 2.79 GiB: fragmentation. max_split_size_mb unset, so the
    // advice is to set it, to the request in MiB: 3000000512 / 2^20 = 2861.02 -> 2861.
    const std::string s = oom_suggestion(info, "");
    CHECK(s.find("max_split_size_mb:2861") != std::string::npos);
    // Neither fix is on: expandable segments (PyTorch's own advice) come first.
    CHECK(s.find("GPUMEMPROF_ALLOC_CONF=expandable_segments:True") != std::string::npos);
    // With them on, free pages were already given back: the advice is about what is live.
    const std::string exp = oom_suggestion(info, "expandable_segments:True");
    CHECK(exp.find("even with expandable_segments:True") != std::string::npos);
    CHECK(exp.find("GPUMEMPROF_ALLOC_CONF=") == std::string::npos);
    // The setting is judged from the parsed config, not a substring: "max_split_size_mb:128" is set,
    // so the advice is a smaller one (128 / 2 = 64 >= 20), GC with a memory fraction, or empty_cache.
    const std::string set = oom_suggestion(info, "max_split_size_mb:128");
    CHECK(set.find("even with max_split_size_mb:128") != std::string::npos);
    CHECK(set.find("smaller max_split_size_mb (e.g. 64)") != std::string::npos);
    CHECK(set.find("garbage_collection_threshold:0.6 together with per_process_memory_fraction") != std::string::npos);
    CHECK(set.find("gpumemprof_empty_cache()") != std::string::npos);
    CHECK(set.find("expandable_segments") == std::string::npos);
    gpumemprof::pool::AllocConf conf;
    conf.max_split_size = 128 * 1048576;
    CHECK(oom_suggestion(info, conf) == set);
    // 30 MiB: 30 / 2 = 15 is below PyTorch's minimum of 20, so no smaller value is offered; GC is
    // already on with a fraction, so the advice is to lower its threshold.
    conf.max_split_size = 30 * 1048576;
    conf.per_process_memory_fraction = 0.5;
    conf.garbage_collection_threshold = 0.8;
    const std::string gc = oom_suggestion(info, conf);
    CHECK(gc.find("even with max_split_size_mb:30") != std::string::npos);
    CHECK(gc.find("smaller max_split_size_mb") == std::string::npos);
    CHECK(gc.find("lower garbage_collection_threshold") != std::string::npos);
    info.reserved = info.allocated; // nothing cached: the live memory itself is the problem
    CHECK(oom_suggestion(info, "").find("reduce what is live") != std::string::npos);
}

TEST_CASE("OOM text of requests of 2^63 bytes and more: sizes stay positive", "[report]") {
    // 2^63 B = 2^33 GiB; 2^64 - 1 B prints as 2^34 GiB (%.2f of the double), as PyTorch's format_size.
    CHECK(util::torch_size_u(std::uint64_t{1} << 63) == "8589934592.00 GiB");
    CHECK(util::torch_size_exact_u(~std::uint64_t{0}) == "17179869184.00 GiB (18446744073709551615 bytes)");
    CHECK(util::torch_size_u(1024) == "1024 bytes");
    pool::OomInfo info;
    info.requested = info.rounded = info.allocation_size = ~std::size_t{0}; // cudaMalloc(-1)
    info.device_total = 85899345920;                                        // 80 GiB
    info.device_free = 85899345920;
    CHECK(oom_message(0, info) ==
          "CUDA out of memory. Tried to allocate 17179869184.00 GiB. GPU 0 has a total capacity of 80.00 GiB of "
          "which 80.00 GiB is free. Of the allocated memory 0 bytes is allocated by the pool, and 0 bytes is "
          "reserved by the pool but unallocated. The largest free cached block is 0 bytes. The program asked for "
          "18446744073709551615 bytes (rounded to 18446744073709551615).");
    // Not fragmentation (a negative need made it look so): larger than the device.
    const std::string s = oom_suggestion(info, "");
    CHECK(s.find("larger than the device (80.00 GiB)") != std::string::npos);
    CHECK(s.find("fragmentation") == std::string::npos);
    info.requested = info.rounded = info.allocation_size = std::size_t{1} << 63;
    CHECK(oom_message(0, info).find("Tried to allocate 8589934592.00 GiB.") != std::string::npos);
}

TEST_CASE("write_all_reports writes the four files atomically and reports failures", "[report]") {
    auto sym = make_symbols();
    auto data = make_data();
    stacks::OomRecord oom;
    oom.device = 0;
    oom.info.requested = 1000;
    oom.info.allocation_size = 2097152;
    oom.frames = {0x900, 0x300, 0x200, 0x100};
    oom.suggestion = "do less";
    data.ooms.push_back(oom);
    ReportInput in;
    char dir[] = "/tmp/gpumemprof_report_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    in.prefix = std::string(dir) + "/run";
    in.pid = 42;
    in.exe = "/bin/app";
    in.seconds_profiled = 1.5;
    DeviceSummary dev;
    dev.device = 0;
    dev.stats.allocated_bytes[stats::kAll].peak = 2621440;
    dev.stats.reserved_bytes[stats::kAll].peak = 23068672;
    dev.stats.inactive_split_bytes[stats::kAll].peak = 1048576;
    dev.at_reserved_peak = pool::ReservedPeak{23068672, 2097152, 1048576};
    in.devices.push_back(dev);
    std::string err;
    REQUIRE(write_all_reports(in, stack_report(data, sym), &err));
    CHECK(err.empty());
    auto slurp = [](const std::string& p) {
        std::ifstream f(p);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    };
    const std::string txt = slurp(in.prefix + ".txt");
    CHECK(txt.find("gpumemprof report for /bin/app (pid 42)") != std::string::npos);
    CHECK(txt.find("time under the profiler: 1.500 s") != std::string::npos);
    // At the reserved peak: 23068672 - 2097152 = 20971520 = 20 MiB unallocated, 1 MiB of it in
    // split segments (the moment's values, not the difference of two peaks).
    CHECK(txt.find("fragmentation when reserved peaked: 20.00 MiB (20971520 bytes) reserved but not allocated "
                   "(of 22.00 MiB), of which 1024.00 KiB (1048576 bytes) free inside split segments") !=
          std::string::npos);
    CHECK(txt.find("#1 2.00 MiB (2097152 bytes) live at the peak in 1 block\n"
                   "    at /src/app.cpp:30:alloc_a()\n"
                   "    from /src/app.cpp:20:train(int)\n"
                   "    from /src/app.cpp:10:main\n") != std::string::npos);
    CHECK(txt.find("== Leaks at exit (live blocks grouped by call site) ==\n"
                   "#1 1024.00 KiB (1048576 bytes) leaked in 1 block\n") != std::string::npos);
    CHECK(txt.find("#2 512 bytes (512 bytes) leaked in 1 block\n"
                   "    at /src/app.hpp:5:fill(void*)\n"
                   "    from /src/app.cpp:41:alloc_b()\n") != std::string::npos);
    CHECK(txt.find("OOM #1 on device 0: request of 1000 bytes (1000 bytes)\n"
                   "  CUDA out of memory. Tried to allocate 2.00 MiB.") != std::string::npos);
    CHECK(txt.find("  suggestion: do less\n") != std::string::npos);
    CHECK(txt.find("_root (4.00MB, 22.00MB)") != std::string::npos);
    CHECK(txt.find("_root (2.50MB, 20.00MB)") != std::string::npos);
    CHECK(slurp(in.prefix + ".folded") ==
          folded(resolve_report(data, sym, parse_skip_list(nullptr)), FoldedMetric::peak_live_bytes));
    CHECK(slurp(in.prefix + ".alloc.folded").find("alloc_a() (app.cpp:30) 3145728\n") != std::string::npos);
    // Each unique address resolved once per resolve_report call: 9 addresses in the data.
    // (The cache across calls is the ProcessSymbolizer's job, tested with it.)

    const std::string js = slurp(in.prefix + ".json");
    // The frame table, each frame once, in the order the sites first use them (innermost first
    // within a site): alloc_a 0, train 1, main 2, alloc_b 3, the inlined fill 4 and alloc_b:41 5
    // (the fake symbolizer's offset is the address); then the sites, root first.
    CHECK(js.find("\"frames\":[{\"function\":\"alloc_a()\",\"file\":\"/src/app.cpp\",\"line\":30,"
                  "\"module\":\"app\",\"offset\":768,\"kind\":\"native\"},{\"function\":\"train(int)\",") !=
          std::string::npos);
    std::size_t kinds = 0;
    for (std::size_t at = js.find("\"kind\":\"native\""); at != std::string::npos;
         at = js.find("\"kind\":\"native\"", at + 1))
        ++kinds;
    CHECK(kinds == 6);
    CHECK(
        js.find(
            "{\"function\":\"alloc_b()\",\"file\":\"/src/app.cpp\",\"line\":41,\"module\":\"app\",\"offset\":1040,") !=
        std::string::npos);
    CHECK(js.find("\"sites\":[{\"frames\":[2,1,0],\"live_bytes\":1048576,") != std::string::npos);
    CHECK(js.find("{\"frames\":[2,1,3],\"live_bytes\":0,") != std::string::npos);
    CHECK(js.find("{\"frames\":[2,1,5,4],\"live_bytes\":512,") != std::string::npos);
    CHECK(js.find("\"suggestion\":\"do less\",\"frames\":[2,1,0]}]") != std::string::npos);
    CHECK(js.find("\"peak\":{\"bytes\":2621440,\"devices\":[],\"sites\":[{\"site\":0,\"bytes\":2097152,\"count\":1},"
                  "{\"site\":1,\"bytes\":524288,\"count\":1}]}") != std::string::npos);
    CHECK(js.find("\"leaks\":{\"bytes\":1049088,\"count\":2,\"sites\":[{\"site\":0,\"bytes\":1048576,\"count\":1,"
                  "\"owner\":\"\"},{\"site\":2,\"bytes\":512,\"count\":1,\"owner\":\"\"}]}") != std::string::npos);
    CHECK(js.find("\"ooms\":[{\"device\":0,\"requested\":1000,") != std::string::npos);
    CHECK(js.find("\"suggestion\":\"do less\"") != std::string::npos);

    in.prefix = std::string(dir) + "/no/such/dir/run";
    err.clear();
    CHECK_FALSE(write_all_reports(in, stack_report(data, sym), &err));
    CHECK(err.find("no/such/dir") != std::string::npos);
    for (const char* ext : {".json", ".txt", ".folded", ".alloc.folded"})
        std::remove((std::string(dir) + "/run" + ext).c_str());
    rmdir(dir);
}

TEST_CASE("the text listings leave out allocation and dispatch plumbing (GPUMEMPROF_HIDE_FRAMES)", "[report]") {
    // A PyTorch-shaped stack (listed root first here; SiteData takes it innermost first): the
    // operator sits under the allocator and the tensor-creation and dispatch plumbing.
    test::FakeSymbolizer s;
    s.add(0x100, "main", "/src/train.cpp", 10);
    s.add(0x110, "at::native::layer_norm(at::Tensor const&)", "", 0, "libtorch_cpu.so");
    s.add(0x120, "c10::impl::wrap_kernel_functor_unboxed_<F>::call(c10::OperatorKernel*)", "", 0, "libtorch_cpu.so");
    s.add(0x130, "at::_ops::native_layer_norm::call(at::Tensor const&)", "", 0, "libtorch_cpu.so");
    s.add(0x140, "at::native::layer_norm_cuda(at::Tensor const&)", "", 0, "libtorch_cuda.so");
    s.add(0x150, "at::empty_like(at::Tensor const&)", "", 0, "libtorch_cpu.so");
    s.add(0x160, "at::native::empty_cuda(c10::ArrayRef<long>)", "", 0, "libtorch_cuda.so");
    s.add(0x170,
          "at::(anonymous namespace)::(anonymous "
          "namespace)::wrapper_CUDA_memory_format_empty(c10::ArrayRef<c10::SymInt>)",
          "", 0, "libtorch_cuda.so");
    s.add(0x180, "at::detail::empty_generic(c10::ArrayRef<long>)", "", 0, "libtorch_cpu.so");
    s.add(0x190, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", "", 0,
          "libc10_cuda.so");
    stacks::ReportData d;
    d.sites.push_back(
        site(1, {0x190, 0x180, 0x170, 0x160, 0x150, 0x140, 0x130, 0x120, 0x110, 0x100}, 4096, 0, 4096, 0, 0));
    d.peak_bytes = 4096;
    const ResolvedReport r = resolve_report(d, s, parse_skip_list(nullptr));
    ReportInput in; // hide_frames unset: the default patterns
    const std::string def = text_report(in, d, r);
    // Default patterns: five frames from the allocator up to at::empty_like are hidden, the
    // operator comes first; the two dispatch frames between it and its caller are hidden too.
    CHECK(def.find("    at libtorch_cuda.so+0x140:at::native::layer_norm_cuda(at::Tensor const&)\n"
                   "    from libtorch_cpu.so+0x110:at::native::layer_norm(at::Tensor const&)\n"
                   "    from /src/train.cpp:10:main\n"
                   "    (7 allocator/dispatch frames not shown (GPUMEMPROF_HIDE_FRAMES))\n") != std::string::npos);
    // "none": every frame, innermost (the allocator) first, 6 of them and the rest counted.
    in.hide_frames = "none";
    const std::string all = text_report(in, d, r);
    CHECK(all.find("    at libc10_cuda.so+0x190:c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::"
                   "allocate(unsigned long)\n") != std::string::npos);
    CHECK(all.find("    (4 outer frames)\n") != std::string::npos);
    // A custom list replaces the default.
    in.hide_frames = "c10::*, at::detail::*";
    const std::string custom = text_report(in, d, r);
    CHECK(custom.find("    at libtorch_cuda.so+0x170:at::(anonymous namespace)::(anonymous "
                      "namespace)::wrapper_CUDA_memory_format_empty") != std::string::npos);
    // Hidden: the allocator, at::detail::empty_generic and the c10::impl wrapper between the two
    // layer_norm frames; shown: six frames from the wrapper to at::native::layer_norm; main is outer.
    CHECK(custom.find("    from libtorch_cpu.so+0x110:at::native::layer_norm(at::Tensor const&)\n"
                      "    (3 allocator/dispatch frames not shown (GPUMEMPROF_HIDE_FRAMES); 1 outer frame)\n") !=
          std::string::npos);
    // The tree and the folded file keep every frame.
    CHECK(folded(r, FoldedMetric::total_bytes).find("NativeCachingAllocator") != std::string::npos);
}

TEST_CASE("the capture cost line says what first meetings cost and a stack without them", "[report]") {
    stacks::ReportData d;
    d.capture.captures = 200;
    d.capture.frames = 200 * 40;
    d.capture.cache_hits = 150;
    d.capture.shadow_hits = 190;
    d.capture.shadow_frames = 200 * 30;
    d.capture.unwind_seconds = 0.010;
    d.capture.python_seconds = 0.001;
    d.capture.intern_seconds = 0.002;
    d.capture.unwind_learnt = 300;
    d.capture.learn_seconds = 0.009;
    test::FakeSymbolizer s;
    const ResolvedReport r = resolve_report(d, s, parse_skip_list(nullptr));
    ReportInput in;
    std::string txt = text_report(in, d, r);
    // 12 ms over 200 stacks: 60 us each; 9 ms of it learning 300 addresses; 15 us a stack without.
    CHECK(txt.find("stack capture cost: 200 stacks, 40.0 frames and 60.00 us each on average (unwind 50.00 us, of "
                   "which Python frames 5.00 us; intern 10.00 us; 75% from the per-thread cache; 95% met a walk the "
                   "thread remembers, 30.0 native frames each not walked), 0.012 s in all\n"
                   "of that, learning how to unwind the 300 code addresses met for the first time (each once): "
                   "9.00 ms; without it a stack cost 15.00 us on average\n") != std::string::npos);
    d.capture.learn_seconds = 0; // nothing learnt in this run (a fork child): no such line
    txt = text_report(in, d, r);
    CHECK(txt.find("learning how to unwind") == std::string::npos);
}

TEST_CASE("the PyTorch events' cost line: each part on the thread where it ran", "[report]") {
    stacks::ReportData d;
    test::FakeSymbolizer s;
    const ResolvedReport r = resolve_report(d, s, parse_skip_list(nullptr));
    ReportInput in;
    // 1000 events, 0.020 s on the program's threads: stacks 5 ms, a site's traits 12 ms (read
    // there, not on the profiler's thread), handing over 1 ms; 800 handed to our thread, 4 ms
    // there: backward 1 ms, kinds 2 ms, blocks 1 ms.
    EventCostSummary& c = in.torch_events;
    c.events = 1000;
    c.seconds = 0.020;
    c.stacks_seconds = 0.005;
    c.traits_seconds = 0.012;
    c.handover_seconds = 0.001;
    c.deferred_events = 800;
    c.deferred_seconds = 0.004;
    c.backward_seconds = 0.001;
    c.kinds_seconds = 0.002;
    c.mirror_seconds = 0.001;
    c.most_waiting = 7;
    std::string txt = text_report(in, d, r);
    CHECK(txt.find("PyTorch allocator events: 1000, 20.00 us each in the profiler on the thread that made them "
                   "(stacks 5.00, a call site's frames read for its kind, once a site 12.00, handing 800 to the "
                   "profiler's thread 1.00), 0.020 s in all; on the profiler's thread 4.00 us each (backward to "
                   "forward 1.00, kinds of memory 2.00, its blocks 1.00), at most 7 waiting\n") != std::string::npos);
    c.deferred_events = 0; // all on the program's threads (GPUMEMPROF_TORCH_THREAD=0)
    txt = text_report(in, d, r);
    CHECK(txt.find("(stacks 5.00, backward to forward 1.00, a call site's frames read for its kind, once a site "
                   "12.00, kinds of memory 2.00, its blocks 1.00), 0.020 s in all\n") != std::string::npos);
}

namespace {

/// The frames the leak and kind tests share: main -> step() in the executable, a helper
/// library's allocation (0x120) and PyTorch's caching allocator (0x130).
void program_frames(test::FakeSymbolizer& s) {
    s.add(0x100, "main", "/src/train.cpp", 10);
    s.add(0x110, "step()", "/src/train.cpp", 20);
    s.add(0x120, "helper_alloc(unsigned long)", "", 0, "libhelper.so");
    s.add(0x130, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char)", "", 0,
          "libc10_cuda.so");
}

} // namespace

TEST_CASE("leaks at exit: the program's blocks by its line, a library's kept apart", "[report]") {
    // Four sites live at exit, root first: main -> step (the executable's code) and then
    //   a helper library's allocation (the program's leak, a library not known to keep memory);
    //   PyTorch's caching allocator, not attached and caching (a segment it keeps cached);
    //   PyTorch's pinned host buffer for
    //   .item() (libtorch_cuda, its CachingHostAllocator); cuBLASLt's workspace.
    test::FakeSymbolizer s;
    program_frames(s);
    s.add(0x140, "at::native::item(at::Tensor const&)", "", 0, "libtorch_cpu.so");
    s.add(0x150,
          "at::cuda::(anonymous namespace)::CUDACachingHostAllocatorImpl::allocate_host_memory_slowpath(unsigned "
          "long, void**)",
          "", 0, "libtorch_cuda.so");
    s.add(0x160, "cublasLtMatmul", "", 0, "libcublasLt.so.13");
    stacks::ReportData d;
    d.sites.push_back(site(1, {0x120, 0x110, 0x100}, 1 << 20, 0, 0, 0, 1 << 20));
    d.sites.push_back(site(2, {0x130, 0x110, 0x100}, 2 << 20, 0, 0, 0, 2 << 20));
    d.sites.push_back(site(3, {0x150, 0x140, 0x110, 0x100}, 4, 0, 0, 0, 4));
    d.sites.push_back(site(4, {0x160, 0x110, 0x100}, 64 << 20, 0, 0, 0, 64 << 20));
    d.live_bytes = (1 << 20) + (2 << 20) + 4 + (64 << 20);
    d.live_count = 4;
    ReportInput in;
    in.exe = "/bin/app"; // the fake frames' module: main and step are the user's code
    const StackReport rep = stack_report(d, s);
    const std::string txt = text_report(in, d, rep.resolved);
    const std::size_t at = txt.find("== Leaks at exit (live blocks grouped by call site) ==\n");
    REQUIRE(at != std::string::npos);
    const std::string leaks = txt.substr(at, txt.find("== Out-of-memory events ==") - at);
    // Only the helper's megabyte is a leak, led by the user's line that called into it.
    CHECK(leaks.find("#1 1024.00 KiB (1048576 bytes) leaked in 1 block\n"
                     "    /src/train.cpp:20:step()   <- your code\n"
                     "    called into:\n"
                     "    at libhelper.so+0x120:helper_alloc(unsigned long)\n") != std::string::npos);
    CHECK(leaks.find("#2 ") == std::string::npos);
    CHECK(leaks.find("kept by PyTorch: 2.00 MiB (2097152 bytes) in 1 block, its own memory, not a leak of the "
                     "program's code\n") != std::string::npos);
    CHECK(leaks.find("kept by PyTorch (libtorch_cuda): 4 bytes (4 bytes) in 1 block, its own memory") !=
          std::string::npos);
    CHECK(leaks.find("kept by cuBLASLt: 64.00 MiB (67108864 bytes) in 1 block") != std::string::npos);

    // The JSON's leaks: every live site, each with its owner ("" for the program).
    const std::string js = json_report(in, rep);
    CHECK(js.find("{\"site\":3,\"bytes\":67108864,\"count\":1,\"owner\":\"cuBLASLt\"},"
                  "{\"site\":1,\"bytes\":2097152,\"count\":1,\"owner\":\"PyTorch\"},"
                  "{\"site\":0,\"bytes\":1048576,\"count\":1,\"owner\":\"\"},"
                  "{\"site\":2,\"bytes\":4,\"count\":1,\"owner\":\"PyTorch (libtorch_cuda)\"}]") != std::string::npos);
    // The HTML page's sites carry the same owner (report.js sums a library's apart) and the
    // page frame of their user's line (report.js leads the tables with it): main is page frame
    // 0 and step 1, the first site's frames coming first.
    const std::string page = html_report(in, rep);
    CHECK(page.find("[[0,1,2],1048576,1048576,1,0,0,0,1,0,\"\",1,\"\"]") != std::string::npos);
    CHECK(page.find("[[0,1,3],2097152,2097152,1,0,0,0,1,0,\"PyTorch\",1,\"\"]") != std::string::npos);
    CHECK(page.find(",4,4,1,0,0,0,1,0,\"PyTorch (libtorch_cuda)\",1,\"\"]") != std::string::npos);
    CHECK(page.find(",1,0,\"cuBLASLt\",1,\"\"]") != std::string::npos);
}

TEST_CASE("leaks at exit under PyTorch's allocator: its tensors are the program's, a handle's workspace not",
          "[report]") {
    // Attached to PyTorch's allocator, every block is a tensor whose innermost frame is the
    // allocator's. Three live at exit, root first main -> step and then the allocator under
    //   at::empty_cuda: an activation the program still holds (its leak);
    //   getCUDABlasLtWorkspace: cuBLASLt's workspace, kept for the process;
    //   getCurrentCUDABlasHandle: cuBLAS's.
    test::FakeSymbolizer s;
    program_frames(s);
    s.add(0x170, "at::native::empty_cuda(c10::ArrayRef<long>)", "", 0, "libtorch_cuda.so");
    s.add(0x180, "at::cuda::getCUDABlasLtWorkspace()", "", 0, "libtorch_cuda.so");
    s.add(0x190, "at::cuda::getCurrentCUDABlasHandle()", "", 0, "libtorch_cuda.so");
    stacks::ReportData d;
    d.sites.push_back(site(1, {0x130, 0x170, 0x110, 0x100}, 2 << 20, 0, 0, 0, 2 << 20));
    d.sites.push_back(site(2, {0x130, 0x180, 0x110, 0x100}, 32 << 20, 0, 0, 0, 32 << 20));
    d.sites.push_back(site(3, {0x130, 0x190, 0x110, 0x100}, 8 << 20, 0, 0, 0, 8 << 20));
    d.live_bytes = (2 << 20) + (32 << 20) + (8 << 20);
    d.live_count = 3;
    ReportInput in;
    in.exe = "/bin/app";
    DeviceSummary dev;
    dev.allocator = "pytorch";
    dev.site_kinds = {{1, "activations", "allocated in the forward pass where the backward pass frees the blocks"},
                      {2, "library workspaces", "allocated by a library's workspace function"},
                      {3, "library workspaces", "allocated by a library's workspace function"}};
    in.devices.push_back(dev);
    const StackReport rep = stack_report(d, s);
    const auto leaks_of = [&](const ReportInput& i) {
        const std::string txt = text_report(i, d, rep.resolved);
        const std::size_t at = txt.find("== Leaks at exit (live blocks grouped by call site) ==\n");
        REQUIRE(at != std::string::npos);
        return txt.substr(at, txt.find("== Out-of-memory events ==") - at);
    };
    std::string leaks = leaks_of(in);
    // Each entry says what kind of memory it is.
    CHECK(leaks.find("#1 2.00 MiB (2097152 bytes) leaked in 1 block\n"
                     "    kind of memory: activations\n"
                     "    at /src/train.cpp:20:step()\n") != std::string::npos);
    CHECK(leaks.find("#2 ") == std::string::npos);
    CHECK(leaks.find("kept by cuBLASLt (its workspace, from PyTorch's allocator): 32.00 MiB (33554432 bytes) in 1 "
                     "block, its own memory, not a leak of the program's code\n") != std::string::npos);
    CHECK(leaks.find("kept by cuBLAS (its workspace, from PyTorch's allocator): 8.00 MiB (8388608 bytes) in 1 "
                     "block") != std::string::npos);
    CHECK(leaks.find("kept by PyTorch") == std::string::npos);
    // The kind decides where it is known: a library's workspace whose getter the report's
    // symbols do not name is still not the program's.
    in.devices[0].site_kinds[0].kind = "library workspaces";
    CHECK(leaks_of(in).find("(none)\nkept by a library (its workspace, from PyTorch's allocator): 2.00 MiB") !=
          std::string::npos);
    in.devices[0].site_kinds[0].kind = "activations";
    // The top sites group the three under step()'s line, each kind with its bytes.
    const std::string txt = text_report(in, d, rep.resolved);
    CHECK(txt.find("#1 42.00 MiB (44040192 bytes) allocated in 3 blocks from 3 call stacks\n"
                   "    kinds of memory: library workspaces 40.00 MiB, activations 2.00 MiB\n") != std::string::npos);

    // A report asked for mid-run (gpumemprof_dump, the dump signal) lists live blocks, no leaks yet.
    in.mid_run = true;
    const std::string mid = text_report(in, d, rep.resolved);
    CHECK(mid.find("== Leaks at exit") == std::string::npos);
    CHECK(mid.find("== Live blocks now, the program still running (grouped by call site) ==\n"
                   "#1 2.00 MiB (2097152 bytes) live in 1 block\n") != std::string::npos);
    CHECK(mid.find("asked for while the program ran (gpumemprof_dump or the\ndump signal): the program may still "
                   "free them.") != std::string::npos);
    CHECK(json_report(in, rep).find("\"mid_run\":true") != std::string::npos);
    CHECK(html_report(in, rep).find("\"mid_run\":true") != std::string::npos);
    in.mid_run = false;
    const std::string js = json_report(in, rep);
    CHECK(js.find("\"mid_run\":false") != std::string::npos);
    CHECK(
        js.find("{\"site\":1,\"bytes\":33554432,\"count\":1,\"owner\":\"cuBLASLt (its workspace, from "
                "PyTorch's allocator)\"},{\"site\":2,\"bytes\":8388608,\"count\":1,\"owner\":\"cuBLAS (its "
                "workspace, from PyTorch's allocator)\"},{\"site\":0,\"bytes\":2097152,\"count\":1,\"owner\":\"\"}]") !=
        std::string::npos);
    const std::string page = html_report(in, rep);
    // Each site's kind of memory is the page's too (report.js adds a column for it).
    CHECK(page.find(",2097152,2097152,1,0,0,0,1,0,\"\",1,\"activations\"]") != std::string::npos);
    CHECK(page.find(",1,0,\"cuBLAS (its workspace, from PyTorch's allocator)\",1,\"library workspaces\"]") !=
          std::string::npos);

    // Its caching off (GPUMEMPROF_TORCH=pool sets PYTORCH_NO_CUDA_MEMORY_CACHING), not attached
    // and no kinds: each of the allocator's cudaMalloc calls is a tensor, the program's, unless a
    // handle's getter is among its frames.
    ReportInput uncached;
    uncached.exe = "/bin/app";
    uncached.torch_uncached = true;
    leaks = leaks_of(uncached);
    CHECK(leaks.find("#1 2.00 MiB (2097152 bytes) leaked in 1 block\n") != std::string::npos);
    CHECK(leaks.find("#2 ") == std::string::npos);
    CHECK(leaks.find("kept by cuBLASLt (its workspace, from PyTorch's allocator): 32.00 MiB") != std::string::npos);
    CHECK(leaks.find("kept by PyTorch") == std::string::npos);
    // Caching and not attached: each is a segment PyTorch keeps cached.
    uncached.torch_uncached = false;
    leaks = leaks_of(uncached);
    CHECK(leaks.find("(none)\nkept by PyTorch: 42.00 MiB (44040192 bytes) in 3 blocks") != std::string::npos);
}

TEST_CASE("the kind of a block outside PyTorch's allocator while attached: whose memory it is", "[report]") {
    // Under step()'s line, root first main -> step and then: an activation from PyTorch's
    // allocator (a kind); cuBLAS's own cudaMalloc (outside PyTorch's allocator: no kind); a
    // helper library's cudaMalloc, the program's; PyTorch's pinned host buffer (its host
    // allocator); a segment PyTorch's allocator acquired, no block of its own; under main, a
    // block of PyTorch's allocator code without a kind (a segment taken before the attach), its
    // own memory though site_owners calls the allocator's blocks the program's. On the H100 timm's
    // forward line read
    // "kinds of memory: activations 2.67 GiB, library workspaces 65.00 MiB, not known 64.15 MiB".
    test::FakeSymbolizer s;
    program_frames(s);
    s.add(0x160, "cublasCreate_v2", "", 0, "libcublas.so.13");
    s.add(0x150, "at::cuda::CUDACachingHostAllocatorImpl::allocate_host_memory(unsigned long, void**)", "", 0,
          "libtorch_cuda.so");
    s.add(0x170, "main_loop()", "/src/other.cpp", 5);
    stacks::ReportData d;
    d.sites.push_back(site(1, {0x130, 0x110, 0x100}, 2 << 20, 0, 0, 0, 2 << 20));
    d.sites.push_back(site(2, {0x160, 0x110, 0x100}, 64 << 20, 0, 0, 0, 64 << 20));
    d.sites.push_back(site(3, {0x120, 0x110, 0x100}, 1 << 20, 0, 0, 0, 1 << 20));
    d.sites.push_back(site(4, {0x150, 0x170, 0x100}, 4, 0, 0, 0, 0));
    d.sites.push_back(site(5, {0x130, 0x170, 0x100}, 0, 20 << 20, 0, 20 << 20, 0));
    d.sites.back().counters.total_count = 0;
    d.sites.push_back(site(6, {0x130, 0x100}, 8 << 20, 0, 0, 0, 0));
    d.live_bytes = (2 << 20) + (64 << 20) + (1 << 20);
    d.live_count = 3;
    ReportInput in;
    in.exe = "/bin/app";
    DeviceSummary dev;
    dev.allocator = "pytorch";
    dev.site_kinds = {{1, "activations", "allocated in the forward pass where the backward pass frees the blocks"}};
    in.devices.push_back(dev);
    const StackReport rep = stack_report(d, s);
    const std::string txt = text_report(in, d, rep.resolved);
    CHECK(txt.find("#1 67.00 MiB (70254592 bytes) allocated in 3 blocks from 3 call stacks\n"
                   "    kinds of memory: cuBLAS's own memory 64.00 MiB, activations 2.00 MiB, outside PyTorch's "
                   "allocator 1024.00 KiB\n") != std::string::npos);
    CHECK(txt.find("not known") == std::string::npos);
    const std::string page = html_report(in, rep);
    CHECK(page.find(",1,0,\"cuBLAS\",1,\"cuBLAS's own memory\"]") != std::string::npos);
    CHECK(page.find(",1,0,\"\",1,\"outside PyTorch's allocator\"]") != std::string::npos);
    CHECK(page.find(",1,0,\"\",1,\"activations\"]") != std::string::npos);
    CHECK(page.find(",0,4,1,0,0,0,0,0,\"PyTorch (libtorch_cuda)\",5,\"PyTorch's own memory (libtorch_cuda)\"]") !=
          std::string::npos);
    CHECK(page.find(",0,0,0,20971520,0,20971520,0,0,\"\",5,\"\"]") != std::string::npos);
    CHECK(page.find(",0,8388608,1,0,0,0,0,0,\"\",0,\"PyTorch's own memory\"]") != std::string::npos);

    // Not attached, no kind is known: no kind line, and the page's kinds stay empty.
    ReportInput plain;
    plain.exe = "/bin/app";
    CHECK(text_report(plain, d, rep.resolved).find("kind") == std::string::npos);
    CHECK(html_report(plain, rep).find(",1,0,\"cuBLAS\",1,\"\"]") != std::string::npos);
}

TEST_CASE("frame filter: patterns match the function or the module; interpreter frames hidden", "[report]") {
    const FrameFilter def(nullptr);
    auto frame = [](std::string fn, std::string module) {
        SymbolFrame f;
        f.function = std::move(fn);
        f.module = std::move(module);
        return f;
    };
    CHECK(def.hidden(frame("", "python3.12"))); // unnamed interpreter frame
    CHECK(def.hidden(frame("_PyEval_EvalFrameDefault", "python3.12")));
    CHECK(def.hidden(frame("PyObject_Call", "libpython3.11.so.1.0")));
    CHECK(def.hidden(frame("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "libtorch_cpu.so")));
    CHECK_FALSE(def.hidden(frame("at::native::mm(at::Tensor const&, at::Tensor const&)", "libtorch_cpu.so")));
    CHECK_FALSE(
        def.hidden(frame("torch::autograd::THPVariable_matmul(_object*, _object*, _object*)", "libtorch_python.so")));
    CHECK_FALSE(def.hidden(frame("main", "app")));
    CHECK_FALSE(def.hidden(frame("", "app")));
    const FrameFilter none("none");
    CHECK(none.patterns().empty());
    CHECK_FALSE(none.hidden(frame("at::_ops::mm::call()", "libtorch_cpu.so")));
    const FrameFilter custom("libfoo*, bar::*");
    CHECK(custom.hidden(frame("anything", "libfoo.so.1")));
    CHECK(custom.hidden(frame("bar::baz()", "app")));
    CHECK_FALSE(custom.hidden(frame("_PyEval_EvalFrameDefault", "python3.12"))); // replaces the default
}

namespace {

/// The folded file made the plain way: every line as a string, sorted as byte strings.
std::string folded_by_sorting_lines(const ResolvedReport& r) {
    std::vector<std::string> lines;
    for (const ResolvedSite& s : r.sites) {
        if (s.counters().total_bytes <= 0)
            continue;
        std::string line;
        for (const SymbolFrame& f : r.frames_of(s.stack))
            line += (line.empty() ? "" : ";") + folded_frame(f);
        lines.push_back((line.empty() ? std::string("[no stack]") : line) + " " +
                        std::to_string(s.counters().total_bytes));
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const std::string& l : lines)
        out += l + "\n";
    return out;
}

} // namespace

TEST_CASE("folded lines are in byte order, also where a frame's text begins or equals a sibling's", "[report]") {
    test::FakeSymbolizer sym;
    // Without file and function: "libx.so+0x12" begins "libx.so+0x123" (then ';' or ' ' against
    // '3'); "g" begins "g (zz" with a space; "fn (a.cpp:1)" is the text of two frames whose
    // labels differ (/x/a.cpp, /y/a.cpp): sites through them are two sites with equal text.
    sym.add(0x12, "", "", 0, "libx.so");
    sym.add(0x123, "", "", 0, "libx.so");
    sym.add(0x1, "g", "", 0, "");
    sym.add(0x2, "g (zz", "", 0, "");
    sym.add(0x3, "fn", "/x/a.cpp", 1);
    sym.add(0x4, "fn", "/y/a.cpp", 1);
    sym.add(0x5, "main", "/src/m.cpp", 9);
    const std::uintptr_t ips[] = {0x12, 0x123, 0x1, 0x2, 0x3, 0x4, 0x5};
    stacks::ReportData data;
    std::uint64_t x = 88172645463325252ull; // xorshift: the same stacks every run
    auto next = [&] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    for (stacks::StackId id = 1; id <= 400; ++id) {
        std::vector<std::uintptr_t> frames;
        const std::size_t depth = 1 + next() % 4;
        for (std::size_t d = 0; d < depth; ++d)
            frames.push_back(ips[next() % 7]);
        // Weights of 1 to 4 digits: their text order is not their numeric order.
        data.sites.push_back(site(id, frames, static_cast<std::int64_t>(1 + next() % 5000), 0, 0, 0, 0));
    }
    data.sites.push_back(site(0, {}, 77, 0, 0, 0, 0)); // no stack
    const ResolvedReport r = resolve_report(data, sym, {});
    REQUIRE(r.sites.size() > 100);
    CHECK(folded(r, FoldedMetric::total_bytes) == folded_by_sorting_lines(r));
}

TEST_CASE("a line-profile tree over its line budget shows its largest lines and what was left out", "[report]") {
    test::FakeSymbolizer sym;
    sym.add(0x10, "main", "/t.cpp", 1);
    for (int i = 1; i <= 5; ++i)
        sym.add(0x20 + static_cast<std::uintptr_t>(i), "c" + std::to_string(i), "/t.cpp", 10 + i);
    sym.add(0x31, "g1", "/t.cpp", 21);
    sym.add(0x32, "g2", "/t.cpp", 22);
    const std::int64_t M = 1048576;
    stacks::ReportData data;
    data.sites.push_back(site(1, {0x31, 0x21, 0x10}, 3 * M, 0, 0, 0, 0)); // main > c1 > g1: 3 MiB
    data.sites.push_back(site(2, {0x32, 0x21, 0x10}, 2 * M, 0, 0, 0, 0)); // main > c1 > g2: 2 MiB
    data.sites.push_back(site(3, {0x22, 0x10}, 4 * M, 0, 0, 0, 0));
    data.sites.push_back(site(4, {0x23, 0x10}, 3 * M, 0, 0, 0, 0));
    data.sites.push_back(site(5, {0x24, 0x10}, 2 * M, 0, 0, 0, 0));
    data.sites.push_back(site(6, {0x25, 0x10}, 1 * M, 0, 0, 0, 0));
    const ResolvedReport r = resolve_report(data, sym, {});
    // Nine lines in all (the root, main, c1..c5, g1, g2): a budget of nine shows them all.
    const std::string whole = "_root (15.00MB, 0.00B)\n"
                              "  /t.cpp:1:main (15.00MB, 0.00B)\n"
                              "    /t.cpp:11:c1 (5.00MB, 0.00B)\n"
                              "      /t.cpp:21:g1 (3.00MB, 0.00B)\n"
                              "      /t.cpp:22:g2 (2.00MB, 0.00B)\n"
                              "    /t.cpp:12:c2 (4.00MB, 0.00B)\n"
                              "    /t.cpp:13:c3 (3.00MB, 0.00B)\n"
                              "    /t.cpp:14:c4 (2.00MB, 0.00B)\n"
                              "    /t.cpp:15:c5 (1.00MB, 0.00B)\n";
    CHECK(line_profile_tree(r, TreeView::cumulative, 9) == whole);
    CHECK(line_profile_tree(r, TreeView::cumulative) == whole);
    // Four lines: the root, main (15), c1 (5), c2 (4); g1 and g2 (3 + 2 MiB) under c1 and c3, c4,
    // c5 (3 + 2 + 1 MiB) under main are counted in one line each.
    CHECK(line_profile_tree(r, TreeView::cumulative, 4) ==
          "_root (15.00MB, 0.00B)\n"
          "  /t.cpp:1:main (15.00MB, 0.00B)\n"
          "    /t.cpp:11:c1 (5.00MB, 0.00B)\n"
          "      [2 more frames not shown] (5.00MB, 0.00B)\n"
          "    /t.cpp:12:c2 (4.00MB, 0.00B)\n"
          "    [3 more frames not shown] (6.00MB, 0.00B)\n"
          "(the tree is cut to its 4 largest lines; each [N more frames not shown] line stands for the frames "
          "left out under its parent; the JSON, the .folded files and the HTML report have every call site)\n");
}

TEST_CASE("when the call stacks cannot be resolved, the warning names what was written and what not", "[report]") {
    char dir[] = "/tmp/gpumemprof_nostacks_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    ReportInput in;
    in.prefix = std::string(dir) + "/run";
    StackReport none; // as prepare_stack_report leaves it when resolving ran out of memory
    none.failure = "out of memory";
    std::string error;
    CHECK_FALSE(write_all_reports(in, none, &error));
    CHECK(error == "the call stacks could not be resolved (out of memory): " + in.prefix +
                       ".json is written without call sites; its .txt, .folded and .alloc.folded are not");
    auto exists = [&](const char* ext) { return ::access((in.prefix + ext).c_str(), F_OK) == 0; };
    CHECK(exists(".json"));
    CHECK_FALSE(exists(".txt"));
    // The whole dump: the HTML is written too (without call sites), the pickle is not.
    CHECK_FALSE(write_dump(in, none, DumpFiles{true, true}));
    CHECK(exists(".html"));
    CHECK_FALSE(exists(".pickle"));
    for (const char* ext : {".json", ".html"})
        std::remove((in.prefix + ext).c_str());
    rmdir(dir);
}
