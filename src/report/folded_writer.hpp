// SPDX-License-Identifier: MIT
// Folded ("collapsed") stacks for flamegraph.pl / speedscope / inferno: one line per stack,
// frames root first joined by ';', a space, the weight in bytes.
#pragma once

#include "report/resolved_stacks.hpp"
#include "util/output_sink.hpp"

#include <string>

namespace gpumemprof::report {

enum class FoldedMetric {
    peak_live_bytes, ///< bytes live at the global peak (heaptrack's flamegraph "peak" cost)
    total_bytes,     ///< every byte handed out over the run
    leaked_bytes,    ///< bytes still live now (at exit: leaks)
};

/// Frame name in a folded line: `function (file.cpp:42)`, or `module+0xoff[:function]` without
/// debug info; ';' and line breaks are replaced so that the line stays parseable.
std::string folded_frame(const SymbolFrame& f);

/// Lines sorted by text (as byte strings); stacks with weight 0 are left out; "[no stack]" for
/// stacks not captured. Written into `out` line by line (the lines are never all in memory);
/// false when `out` failed.
bool write_folded(util::OutputSink& out, const ResolvedReport& r, FoldedMetric metric);

} // namespace gpumemprof::report
