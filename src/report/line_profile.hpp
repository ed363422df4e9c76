// SPDX-License-Identifier: MIT
// The CuPy LineProfileHook-style tree: `_root (used, acquired)` and one line per frame, nested
// two spaces per depth, `{filename}:{lineno}:{func_name} ({used_bytes}, {acquired_bytes})`.
#pragma once

#include "report/resolved_stacks.hpp"

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

/// One line per frame (inlined frames are lines of their own). Children are ordered by used
/// bytes, then acquired bytes, descending (CuPy keeps first-seen order, which we do not record);
/// frames with zero in both columns are left out.
std::string line_profile_tree(const ResolvedReport& r, TreeView view);

} // namespace gpumemprof::report
