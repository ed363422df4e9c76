// SPDX-License-Identifier: MIT
// The device accounting in the reports: where each device's memory went, as the driver counts it
// (ReportInput::accounting), with the call-site bytes split by the library that owns them.
#pragma once

#include "report/reports.hpp"
#include "util/json_writer.hpp"

#include <map>
#include <string>

namespace gpumemprof::report {

/// Bytes of `m.pool_sites` by owning library ("" = the program), PyTorch's own blocks left out
/// (they are counted in its allocator's buckets).
std::map<std::string, std::int64_t> bytes_by_library(const AccountingMoment& m, const StackReport& stacks);

/// "device_accounting": {"driver_used_bytes", "driver_total_bytes", "t_s", "buckets",
/// "by_library", "unexplained_bytes", "at_exit": {...}, "readings"} for `a`.
void write_accounting_json(util::JsonWriter& w, const DeviceAccountingSummary& a, const StackReport& stacks);

/// The .txt section: a table per device, at the peak of the driver's used figure and at exit.
std::string accounting_text(const ReportInput& in, const StackReport& stacks);

} // namespace gpumemprof::report
