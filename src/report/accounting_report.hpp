// SPDX-License-Identifier: MIT
// The device accounting in the reports: where each device's memory went, as the driver counts it
// (ReportInput::accounting), with the call-site bytes split by the library that owns them.
#pragma once

#include "report/reports.hpp"
#include "util/json_writer.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpumemprof::report {

/// Bytes of `m.pool_sites` by owning library ("" = the program), PyTorch's own blocks left out
/// (they are counted in its allocator's buckets).
std::map<std::string, std::int64_t> bytes_by_library(const AccountingMoment& m, const StackReport& stacks);
std::map<std::string, std::int64_t> bytes_by_library(const AccountingMoment& m, const ResolvedReport& resolved);

/// "device_accounting": {"driver_used_bytes", "driver_total_bytes", "t_s", "buckets",
/// "by_library", "unexplained_bytes", "at_exit": {...}, "readings", "timeline"} for `a`.
/// "timeline": the readings over time as columns, "t_ns", "driver_used_bytes",
/// "unexplained_bytes" and "buckets" (name -> bytes at each reading, 0 where it had none).
void write_accounting_json(util::JsonWriter& w, const DeviceAccountingSummary& a, const StackReport& stacks);

/// The .txt section: a table per device, at the peak of the driver's used figure and at exit.
std::string accounting_text(const ReportInput& in, const StackReport& stacks);

/// The readings over time with one column per bucket: the names in order of first use, and for
/// reading i its bytes in each (`columns[b][i]`).
struct AccountingColumns {
    std::vector<std::string> names;
    std::vector<std::vector<std::int64_t>> columns;
};
AccountingColumns accounting_columns(const std::vector<AccountingMoment>& history);

/// What the device held at OOM `seq` (stacks::OomRecord::seq); nullptr when not known.
const OomSplit* find_oom_split(const ReportInput& in, std::uint64_t seq);
/// The lines of an OOM's entry in the .txt: the driver's used figure split, and PyTorch's live
/// blocks by kind.
std::string oom_split_text(const OomSplit& s, const ResolvedReport& resolved);
/// Its keys in an OOM's JSON object: "device_accounting" (as at the peak) and "memory_kinds"
/// (kind -> bytes), each when known.
void write_oom_split_json(util::JsonWriter& w, const OomSplit& s, const ResolvedReport& resolved);

} // namespace gpumemprof::report
