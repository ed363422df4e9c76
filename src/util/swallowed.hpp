// SPDX-License-Identifier: MIT
// The profiler's noexcept boundaries: an exception caught there (std::bad_alloc, mostly, in a
// program short of memory) is dropped so that the program goes on, but not silently: each one is
// counted (the reports' `internal_errors`) and named at debug level (GPUMEMPROF_LOG=debug).
#pragma once

#include <cstdint>

namespace gpumemprof::util {

/// Called from a `catch (...)` that carries on: counts it and logs the place at debug level.
void swallowed(const char* file, int line) noexcept;
/// How many swallowed() calls this process has made.
std::uint64_t swallowed_count() noexcept;

} // namespace gpumemprof::util

#define GPUMEMPROF_SWALLOWED() ::gpumemprof::util::swallowed(__FILE__, __LINE__)
