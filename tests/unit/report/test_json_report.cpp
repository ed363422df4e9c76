// SPDX-License-Identifier: MIT
// report/json_report: the JSON says what the snapshot says (one moment), and a failure while it
// is built writes no file rather than a malformed one.
#include "fake_symbolizer.hpp"
#include "report/json_report.hpp"
#include "report/reports.hpp"
#include "report/resolved_stacks.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

// This file replaces operator new and delete with malloc and free on purpose.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// ---- allocation failure on demand --------------------------------------------------------------
// This executable replaces the global operator new: when armed with N, the N-th allocation from
// then on throws std::bad_alloc, as it would when the host process runs out of memory.
namespace {
std::atomic<long> g_fail_in{0}; // 0: off; N: the N-th allocation from now fails
} // namespace

void* operator new(std::size_t n) {
    if (g_fail_in.load(std::memory_order_relaxed) > 0 && g_fail_in.fetch_sub(1) == 1)
        throw std::bad_alloc();
    if (void* p = std::malloc(n ? n : 1))
        return p;
    throw std::bad_alloc();
}
// The nothrow form is left alone: its callers (std::stable_sort's buffer) cope with null.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

using namespace gpumemprof;
using namespace gpumemprof::report;

namespace {

/// Structure check: brackets and braces match outside strings, strings end, one top-level object.
bool well_formed(const std::string& s) {
    std::vector<char> open;
    bool in_string = false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (open.empty() && i != 0)
                return false; // a second top-level value
            open.push_back(c);
        } else if (c == '}' || c == ']') {
            if (open.empty() || open.back() != (c == '}' ? '{' : '['))
                return false;
            open.pop_back();
        } else if (c == ',' && i + 1 < s.size() && (s[i + 1] == '}' || s[i + 1] == ']')) {
            return false;
        }
    }
    return !s.empty() && s[0] == '{' && open.empty() && !in_string;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d))
            if (e->d_name[0] != '.')
                out.push_back(e->d_name);
        ::closedir(d);
    }
    return out;
}

/// A report with one pool, a pass-through-only device, three call sites and an OOM.
struct Fixture {
    test::FakeSymbolizer sym;
    ReportInput in;
    StackReport stacks;

    Fixture() {
        sym.add(0x100, "main", "/src/app.cpp", 10);
        sym.add(0x200, "train(int)", "/src/app.cpp", 20);
        sym.add(0x300, "alloc_a()", "/src/app.cpp", 30);
        in.pid = 42;
        in.host = "node7";
        in.exe = "/bin/app";
        in.effective_alloc_conf = "max_split_size_mb:64";
        in.caching = true;
        in.doors = {3, 5, 7};
        in.host_pinned = {1, 1, 0, 4096, 4096};
        in.foreign_invalid_frees = 2;
        DeviceSummary d;
        d.device = 0;
        d.context = 0;
        d.context_alive = true;
        d.invalid_frees = 1;
        d.ipc_refused = 5;
        d.pool_counters = {11, 13, 17, 19, 23, 1, 29000, 43000, 47000, 31, {{700, 37}, {999, 41}}};
        d.pending.bytes.increase(4096);
        d.pending.bytes.decrease(1024);
        d.pending.blocks.increase(2);
        d.pending.blocks.decrease(1);
        d.passthrough.managed = {2, 1, 1024, 2048, 3072};
        d.stats.allocated_bytes[stats::kAll].peak = 2097152;
        in.devices.push_back(d);
        DeviceSummary p;
        p.device = 1;
        p.passthrough.async = {4, 4, 0, 512, 2048};
        in.devices_without_pool.push_back(p);
        for (int i = 0; i < 3; ++i) {
            stacks::SiteData s;
            s.id = static_cast<stacks::StackId>(i + 1);
            s.frames = {static_cast<std::uintptr_t>(0x300 - 0x100 * (i % 2)), 0x200, 0x100};
            s.counters.total_bytes = 1024 * (i + 1);
            s.counters.total_count = 1;
            s.counters.live_bytes = 512;
            s.counters.live_count = 1;
            stacks.data.sites.push_back(s);
        }
        stacks::OomRecord oom;
        oom.device = 0;
        oom.info.requested = 1000;
        oom.frames = {0x300, 0x200, 0x100};
        stacks.data.ooms.push_back(oom);
        stacks.data.peak_bytes = 3072;
        stacks.resolved = resolve_report(stacks.data, sym, parse_skip_list(nullptr));
        stacks.ok = true;
    }
};

} // namespace

TEST_CASE("the JSON's figures are the snapshot's: one moment for every field", "[report][json]") {
    Fixture f;
    const std::string js = json_report(f.in, f.stacks);
    REQUIRE(well_formed(js));
    CHECK(js.rfind("{\"version\":2,\"pid\":42,\"host\":\"node7\",\"exe\":\"/bin/app\","
                   "\"rank\":-1,\"local_rank\":-1,\"world_size\":-1,\"rank_from\":\"\",\"cuda_visible_devices\":\"\","
                   "\"start_time_ns\":0,\"steps\":[],\"steps_dropped\":0,"
                   "\"alloc_conf\":\"max_split_size_mb:64\",\"pool\":\"caching\",",
                   0) == 0);
    CHECK(js.find("\"doors\":{\"dlsym_substitutions\":3,\"proc_address_substitutions\":5,\"runtime_calls\":7}") !=
          std::string::npos);
    CHECK(js.find("\"host_pinned\":{\"calls\":1,\"frees\":1,\"current_bytes\":0,\"peak_bytes\":4096,"
                  "\"total_bytes\":4096},\"foreign_invalid_frees\":2") != std::string::npos);
    CHECK(js.find("\"device\":0,\"context\":0,\"context_alive\":true,") != std::string::npos);
    CHECK(js.find("\"invalid_frees\":1,\"ipc_refused\":5,\"pool_counters\":{\"fences_recorded\":11,"
                  "\"fence_polls\":13,\"misses\":17,\"deferred_frees\":19,\"fence_waits\":23,"
                  "\"wait_timeouts\":1,\"wait_ns\":29000,\"fence_ns\":43000,\"poll_ns\":47000,\"host_failures\":31},"
                  "\"driver_errors\":{\"700\":37,\"999\":41},\"pending_free\":{\"bytes_current\":3072,"
                  "\"bytes_peak\":4096,\"blocks_current\":1,\"blocks_peak\":2,\"blocks_total\":2}") !=
          std::string::npos);
    CHECK(js.find("\"managed\":{\"calls\":2,\"frees\":1,\"current_bytes\":1024,\"peak_bytes\":2048,"
                  "\"total_bytes\":3072}") != std::string::npos);
    // The device with pass-through memory only: no pool, its own ledger.
    CHECK(js.find("{\"device\":1,\"context\":-1,\"context_alive\":false,") != std::string::npos);
    CHECK(js.find("\"async\":{\"calls\":4,\"frees\":4,\"current_bytes\":0,\"peak_bytes\":512,"
                  "\"total_bytes\":2048}") != std::string::npos);
    CHECK(js.find("\"peak\":{\"bytes\":3072,") != std::string::npos);
    CHECK(js.find("\"ooms\":[{\"device\":0,\"requested\":1000,") != std::string::npos);
    // Without stack data the stack sections are left out, the rest stays.
    f.stacks.ok = false;
    const std::string bare = json_report(f.in, f.stacks);
    CHECK(well_formed(bare));
    CHECK(bare.find("\"sites\"") == std::string::npos);
    CHECK(bare.find("\"ipc_refused\":5") != std::string::npos);
}

TEST_CASE("the reports are written whole or not at all, whichever allocation fails", "[report][json]") {
    Fixture f;
    char dir[] = "/tmp/gpumemprof_json_XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    f.in.prefix = std::string(dir) + "/run";
    const std::string path = f.in.prefix + ".json";
    const char* const stack_files[] = {".txt", ".folded", ".alloc.folded"};
    int failed = 0;
    bool succeeded = false;
    for (long n = 1; n < 100000 && !succeeded; ++n) {
        // A JSON from an earlier dump, which a failed one must leave as it is.
        { std::ofstream(path) << "{\"earlier\":true}"; }
        for (const char* ext : stack_files)
            ::unlink((f.in.prefix + ext).c_str());
        std::string error;
        g_fail_in = n;
        const bool ok = write_all_reports(f.in, f.stacks, &error);
        const bool injected = g_fail_in.exchange(0) <= 0; // the n-th allocation did happen
        std::vector<std::string> files = files_in(dir);
        std::sort(files.begin(), files.end());
        INFO("allocation " << n << " failed: " << injected);
        // No temporary left behind; the four files together or none of the new ones.
        if (ok)
            REQUIRE(files == std::vector<std::string>{"run.alloc.folded", "run.folded", "run.json", "run.txt"});
        else
            REQUIRE(files == std::vector<std::string>{"run.json"});
        const std::string content = slurp(path);
        REQUIRE(well_formed(content));
        if (ok) {
            CHECK(content.find("\"ooms\":[{\"device\":0") != std::string::npos);
            succeeded = !injected;
        } else {
            CHECK(content == "{\"earlier\":true}");
            CHECK_FALSE(error.empty());
            ++failed;
        }
    }
    CHECK(succeeded);
    // Every allocation of the writers was made to fail once (hundreds, inside the sections too).
    CHECK(failed > 100);
    ::unlink(path.c_str());
    for (const char* ext : stack_files)
        ::unlink((f.in.prefix + ext).c_str());
    ::rmdir(dir);
}
