// SPDX-License-Identifier: MIT
// torch.cuda.memory_stats() model: Stat update rules, resets, flattening and JSON.
#include "stats/device_stats.hpp"

#include "stats/stat_fields.hpp"
#include "util/json_writer.hpp"

#include <algorithm>

namespace gpumemprof::stats {

// resetPeakStats: every array and both oversize stats; counters untouched.
void DeviceStats::reset_peak() {
    for_each_stat([](Stat& s) { s.reset_peak(); });
}

// resetAccumulatedStats: allocated/freed of every stat and all event counters go to 0
// (the Python docstring only names retries and ooms; the C++ zeroes all five).
void DeviceStats::reset_accumulated() {
    for_each_stat([](Stat& s) { s.reset_accumulated(); });
#define X(name) name = 0;
    GPUMEMPROF_STAT_COUNTERS(X)
#undef X
}

namespace {

// Index order of StatType; the names THCPModule_memoryStats uses.
constexpr const char* kPoolNames[kNumStatTypes] = {"all", "small_pool", "large_pool"};

void add_stat(std::vector<std::pair<std::string, std::int64_t>>& out, const std::string& prefix, const Stat& s) {
    out.emplace_back(prefix + ".allocated", s.allocated);
    out.emplace_back(prefix + ".current", s.current);
    out.emplace_back(prefix + ".freed", s.freed);
    out.emplace_back(prefix + ".peak", s.peak);
}

} // namespace

std::vector<std::pair<std::string, std::int64_t>> flatten(const DeviceStats& stats) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    out.reserve(122);
#define X(name)                                                                                                        \
    for (int t = 0; t < kNumStatTypes; ++t)                                                                            \
        add_stat(out, std::string(#name ".") + kPoolNames[t], stats.name[t]);
    GPUMEMPROF_STAT_ARRAYS(X)
#undef X
#define X(name) add_stat(out, #name, stats.name);
    GPUMEMPROF_STAT_SINGLES(X)
#undef X
#define X(name) out.emplace_back(#name, stats.name);
    GPUMEMPROF_STAT_COUNTERS(X)
    GPUMEMPROF_STAT_CONSTANTS(X)
#undef X
    // torch.cuda.memory_stats sorts the flattened keys (plain string order) into an OrderedDict.
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
}

std::string to_json(const DeviceStats& stats) {
    util::JsonWriter w;
    w.begin_object();
    for (const auto& [k, v] : flatten(stats))
        w.field(k, v);
    w.end_object();
    return w.take();
}

} // namespace gpumemprof::stats
