// SPDX-License-Identifier: MIT
// Program images of this process: exec() without fork replaces the program but keeps the pid, so
// the new program would write its report and trace over the old one's. The old image writes its
// files at exec (Profiler::before_exec); the new one finds them (they name this pid and changed
// since the process began) and writes its own beside them, under `<name>.exec<k>`.
#pragma once

#include <string>

namespace gpumemprof::core {

/// The running program's file (/proc/self/exe), "" when it cannot be read.
std::string executable_path();

/// What is read of a file to tell whose it is.
enum class ImageFile {
    json_report, ///< a <prefix>.json: its "pid" member
    trace,       ///< a GPUMEMPROF_TRACE file: the pid in its header
};

/// True when `path` is a file of `kind` that an earlier program image of this process wrote: it
/// names this process's pid and was changed after the process began (a process that had this pid
/// before had ended before this one began). Never throws; opens and closes one fd.
bool from_earlier_image(const std::string& path, ImageFile kind) noexcept;

/// `stem` when no earlier image of this process wrote `stem + ext`, else the first
/// `stem.exec<k>` (k = 1, 2, ...) for which none did. Never throws (`stem` on failure).
std::string name_after_earlier_images(const std::string& stem, const std::string& ext, ImageFile kind) noexcept;

} // namespace gpumemprof::core
