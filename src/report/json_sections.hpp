// SPDX-License-Identifier: MIT
// The stack-related keys of the exit JSON: "frames", "sites", "peak", "leaks", "ooms", "stacks".
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"
#include "util/json_writer.hpp"

namespace gpumemprof::report {

/// Writes the keys into the object `w` is positioned in (docs/outputs.md). "frames" holds every
/// frame once; sites and OOMs list theirs as indices into it, root first; sites are referred to
/// by their index in "sites".
void json_sections(util::JsonWriter& w, const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& r);

} // namespace gpumemprof::report
