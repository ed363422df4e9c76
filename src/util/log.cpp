// SPDX-License-Identifier: MIT
#include "util/log.hpp"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <memory>

namespace gpumemprof::log {
namespace {

// Defaults until configure() runs with the parsed GPUMEMPROF_LOG / GPUMEMPROF_MAX_WARNINGS.
std::atomic<int> g_level{static_cast<int>(Level::warning)};
std::atomic<int> g_budget{100};

spdlog::logger* logger() {
    // Never destroyed: warnings may be written while the process tears down static objects.
    static spdlog::logger* l = [] {
        auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
        auto* lg = new spdlog::logger("gpumemprof", std::move(sink));
        lg->set_pattern("gpumemprof: %l [%P]: %v");
        lg->set_level(spdlog::level::trace);
        lg->flush_on(spdlog::level::trace);
        return lg;
    }();
    return l;
}

} // namespace

void configure(int level, int max_warnings) noexcept {
    g_level.store(level, std::memory_order_relaxed);
    g_budget.store(max_warnings, std::memory_order_relaxed);
}

bool enabled(Level lv) noexcept {
    return static_cast<int>(lv) >= g_level.load(std::memory_order_relaxed);
}

void write(Level lv, std::string_view message) noexcept {
    if (!enabled(lv))
        return;
    if (lv >= Level::warning && g_budget.fetch_sub(1, std::memory_order_relaxed) <= 0)
        return;
    try {
        static constexpr spdlog::level::level_enum kMap[] = {spdlog::level::debug, spdlog::level::info,
                                                             spdlog::level::warn, spdlog::level::err};
        logger()->log(kMap[static_cast<int>(lv)], "{}", message);
    } catch (...) {
    }
}

} // namespace gpumemprof::log
