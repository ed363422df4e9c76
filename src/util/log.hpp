// SPDX-License-Identifier: MIT
// Diagnostics to stderr as "gpumemprof: warning [pid]: ...". Never throws; capped in count
// (GPUMEMPROF_MAX_WARNINGS, default 100) so a misbehaving program cannot flood its own log.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace gpumemprof::log {

enum class Level { debug, info, warning, error };

void write(Level level, std::string_view message) noexcept;
bool enabled(Level level) noexcept;

template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) noexcept {
    if (!enabled(Level::warning))
        return;
    try {
        write(Level::warning, fmt::format(f, std::forward<Args>(args)...));
    } catch (...) {
    }
}

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) noexcept {
    if (!enabled(Level::info))
        return;
    try {
        write(Level::info, fmt::format(f, std::forward<Args>(args)...));
    } catch (...) {
    }
}

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) noexcept {
    if (!enabled(Level::debug))
        return;
    try {
        write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
    } catch (...) {
    }
}

} // namespace gpumemprof::log
