// SPDX-License-Identifier: MIT
// `gpumemprof report TRACE`: the HTML and text reports of a recorded run, after the fact, on any
// machine. The trace's events are fed, in their order and with their times, to the same call-site
// table, time series and event ring as in the live library; its stack blocks (trace version 2)
// name the call sites; the pool's statistics come from replaying the trace under its recorded
// settings (tools::replay, the library's own pool code). A version-1 trace has no stack blocks:
// its call sites are reported without frames.
#pragma once

#include "report/reports.hpp"

#include <string>

namespace gpumemprof::tools {

struct OfflineReport {
    report::ReportInput in;
    report::StackReport stacks;
    std::uint64_t events = 0;
    std::size_t named_stacks = 0; ///< stacks the trace's stack blocks name
};

/// False with *error ("byte offset N: ...") for a bad trace.
bool build_offline_report(const std::string& trace_path, bool allow_truncated, OfflineReport* out, std::string* error,
                          std::string* warning);

int cmd_report(int argc, char** argv);

} // namespace gpumemprof::tools
