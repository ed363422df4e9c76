// SPDX-License-Identifier: MIT
// The CuPy LineProfileHook-style tree: `_root (used, acquired)` and one line per frame, nested
// two spaces per depth, `{filename}:{lineno}:{func_name} ({used_bytes}, {acquired_bytes})`.
#pragma once

#include "report/resolved_stacks.hpp"
#include "util/output_sink.hpp"

#include <cstddef>
#include <string>

namespace gpumemprof::report {

enum class TreeView {
    /// CuPy's meaning: used = every byte the pool handed out under the frame over the run
    /// (never decremented by frees), acquired = device memory obtained from the driver for them.
    cumulative,
    /// used = bytes live under the frame at the global peak; acquired = device memory obtained
    /// for those frames' requests up to that moment.
    at_peak,
};

/// Lines of one tree at most (besides the lines that say what was left out).
inline constexpr std::size_t kTreeLines = 10000;

/// One line per frame (inlined frames are lines of their own). Children are ordered by used
/// bytes, then acquired bytes, descending, then by text (CuPy keeps first-seen order, which we do
/// not record); frames with zero in both columns are left out. A tree of more than `max_lines`
/// lines shows the `max_lines` frames with the most used (then acquired) bytes, each with its
/// callers; under a frame whose callees are not all shown, one line
/// `[N more frames not shown] (used, acquired)` gives their number and their bytes, and a note
/// after the tree says it was cut. Written into `out` as it is made.
void write_line_profile(util::BufferedOut& out, const ResolvedReport& r, TreeView view,
                        std::size_t max_lines = kTreeLines);
/// The same as one string.
std::string line_profile_tree(const ResolvedReport& r, TreeView view, std::size_t max_lines = kTreeLines);

} // namespace gpumemprof::report
