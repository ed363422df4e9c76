// SPDX-License-Identifier: MIT
// Write a whole file atomically: a temporary file beside it, then rename(2).
#pragma once

#include <string>
#include <string_view>

namespace gpumemprof::util {

/// Returns true on success. On failure returns false and sets *error (if given) to a message
/// naming the path and the OS error; never throws. Leaves no temporary file behind.
bool write_file_atomic(const std::string& path, std::string_view content, std::string* error = nullptr) noexcept;

} // namespace gpumemprof::util
