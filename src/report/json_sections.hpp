// SPDX-License-Identifier: MIT
// The stack-related keys of the exit JSON: "sites", "peak", "leaks", "ooms", "stacks".
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"
#include "util/json_writer.hpp"

namespace gpumemprof::report {

/// Writes the keys into the object `w` is positioned in. Sites are referred to by their index
/// in "sites". Frames are root first.
void json_sections(util::JsonWriter& w, const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& r);

} // namespace gpumemprof::report
