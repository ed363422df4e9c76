// SPDX-License-Identifier: MIT
// Write whole files atomically: each to a new temporary file beside it, then rename(2).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumemprof::util {

/// Write each (path, content) pair, all or nothing: every temporary file is written first; only
/// when all are complete are they renamed into place (a full disk leaves none of them written).
/// A temporary file is created exclusively (O_EXCL|O_NOFOLLOW: a file or symlink planted at its
/// name is never written through), writes raise no signal (util::write_all_quietly), and an
/// existing target that is not a regular file (a FIFO, a device, a directory) is left alone: the
/// set is not written. Returns true on success; on failure false with *error naming the path and
/// the OS error; never throws; leaves no temporary file behind.
bool write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files,
                        std::string* error = nullptr) noexcept;

/// One file: the same rules.
bool write_file_atomic(const std::string& path, std::string_view content, std::string* error = nullptr) noexcept;

} // namespace gpumemprof::util
