// SPDX-License-Identifier: MIT
// Diagnostics to stderr as "gpumemprof: warning [pid]: ...". Never throws; capped in count
// (GPUMEMPROF_MAX_WARNINGS, default 100) so a misbehaving program cannot flood its own log.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace gpumemprof::log {

enum class Level { debug, info, warning, error };

/// Level (0 debug .. 3 error) and warning budget, from the parsed options (util::Options).
void configure(int level, int max_warnings) noexcept;
void write(Level level, std::string_view message) noexcept;
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
