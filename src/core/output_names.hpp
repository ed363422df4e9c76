// SPDX-License-Identifier: MIT
// Where the report files go: GPUMEMPROF_OUTPUT's pattern, anchored and expanded.
#pragma once

#include <string>

namespace gpumemprof::core {

/// A GPUMEMPROF_OUTPUT pattern made absolute against the current directory, whose '%'s are
/// doubled so that expanding the pattern leaves them as they are. Unchanged when it is absolute
/// or empty, or when the current directory cannot be had (then it is resolved when written).
std::string anchored_pattern(const std::string& pattern);

/// Where a dump's files go, <stem>.json etc. (before an earlier program image's suffix):
/// `pattern` expanded for this process; a pattern ending in '/' names a directory (files
/// gpumemprof-<pid>.* inside it); a fork child's stem carries its pid when the pattern does not.
std::string report_stem(const std::string& pattern, bool pid_in_pattern, bool forked_child);

} // namespace gpumemprof::core
