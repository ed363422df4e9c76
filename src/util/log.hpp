// SPDX-License-Identifier: MIT
// Diagnostics to stderr as "gpumemprof: warning [pid]: ...". Never throws; capped in count
// (GPUMEMPROF_MAX_WARNINGS, default 100) so a misbehaving program cannot flood its own log;
// never into a file the program put on fd 2 after ours was the stderr it started with.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace gpumemprof::log {

enum class Level { debug, info, warning, error };

/// Level (0 debug .. 3 error) and warning budget, from the parsed options (util::Options).
void configure(int level, int max_warnings) noexcept;
void write(Level level, std::string_view message) noexcept;
/// `text` as it is to fd 2, if fd 2 is still the stderr the process had when the library was
/// loaded (same device and inode); dropped otherwise (a program that closed stderr and opened a
/// file of its own there must not find our lines in it). Every line of ours goes through here.
void to_stderr(std::string_view text) noexcept;
bool enabled(Level level) noexcept;

template <typename... Args> void emit(Level level, fmt::format_string<Args...> f, Args&&... args) noexcept {
    if (!enabled(level))
        return;
    try {
        write(level, fmt::format(f, std::forward<Args>(args)...));
    } catch (...) {
    }
}

template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... args) noexcept {
    emit(Level::warning, f, std::forward<Args>(args)...);
}
template <typename... Args> void info(fmt::format_string<Args...> f, Args&&... args) noexcept {
    emit(Level::info, f, std::forward<Args>(args)...);
}
template <typename... Args> void debug(fmt::format_string<Args...> f, Args&&... args) noexcept {
    emit(Level::debug, f, std::forward<Args>(args)...);
}

} // namespace gpumemprof::log
