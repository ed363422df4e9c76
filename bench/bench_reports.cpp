// SPDX-License-Identifier: MIT
// Benchmark: symbolise (libdw, this process) and write the reports for 10,000 unique stacks.
#include "report/folded_writer.hpp"
#include "report/line_profile.hpp"
#include "report/oom_advice.hpp"
#include "report/reports.hpp"
#include "report/resolved_stacks.hpp"
#include "report/text_report.hpp"
#include "stacks/backtrace.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

using namespace gpumemprof;

namespace {

std::uintptr_t outer[24];
int outer_n;

__attribute__((noinline)) void take_outer(int depth) {
    if (depth > 0) {
        take_outer(depth - 1);
        asm volatile("" ::: "memory");
        return;
    }
    outer_n = stacks::capture_backtrace(outer, 24, 0);
}

} // namespace

int main() {
    take_outer(12);
    // Leaf addresses inside real, debug-info-carrying code of the report writers (so each one
    // needs a real DWARF lookup): 10,000 distinct stacks over ~2,500 distinct leaf addresses and
    // 40 mid-level variants.
    const std::uintptr_t bases[] = {
        reinterpret_cast<std::uintptr_t>(&report::text_report),
        reinterpret_cast<std::uintptr_t>(&report::write_folded),
        reinterpret_cast<std::uintptr_t>(&report::line_profile_tree),
        reinterpret_cast<std::uintptr_t>(&report::resolve_report),
        reinterpret_cast<std::uintptr_t>(
            static_cast<std::string (*)(const pool::OomInfo&, const std::string&)>(&report::oom_suggestion)),
    };
    stacks::ReportData data;
    for (int i = 0; i < 10000; ++i) {
        stacks::SiteData s;
        s.id = static_cast<stacks::StackId>(i + 1);
        s.frames.push_back(bases[i % 5] + static_cast<std::uintptr_t>((i / 5) % 500) + 1);
        s.frames.push_back(bases[(i / 7) % 5] + static_cast<std::uintptr_t>((i / 250) % 40) * 3 + 1);
        s.frames.insert(s.frames.end(), outer, outer + outer_n);
        s.counters.total_bytes = s.counters.total_count = 1;
        s.counters.total_bytes = 512 * (i + 1);
        s.counters.peak_live_bytes = 512 * (i % 3);
        s.counters.live_bytes = 512 * (i % 5 == 0);
        data.sites.push_back(std::move(s));
    }
    report::ReportInput in;
    in.prefix = "/tmp/gpumemprof_bench_" + std::to_string(getpid());
    const auto t0 = std::chrono::steady_clock::now();
    report::ProcessSymbolizer sym;
    std::string err;
    // What prepare_stack_report does with the process's symbolizer, then the dump's writer.
    report::StackReport stacks;
    stacks.data = std::move(data);
    stacks.resolved = report::resolve_report(stacks.data, sym, report::parse_skip_list(nullptr));
    stacks.ok = true;
    const bool ok = report::write_all_reports(in, stacks, &err);
    const auto t1 = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(t1 - t0).count();
    std::printf("stacks: %zu, frames per stack: %d, unique addresses resolved: %zu\n", stacks.data.sites.size(),
                outer_n + 2, sym.resolved_count());
    std::printf("symbolise + write .json/.txt/.folded/.alloc.folded: %.3f s (target < 2 s: %s)%s\n", secs,
                secs < 2.0 ? "met" : "NOT met", ok ? "" : (" write failed: " + err).c_str());
    for (const char* ext : {".json", ".txt", ".folded", ".alloc.folded"})
        std::remove((in.prefix + ext).c_str());
    return ok ? 0 : 1;
}
