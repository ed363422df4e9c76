// SPDX-License-Identifier: MIT
#include "util/log.hpp"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <cstdlib>
#include <memory>

namespace gpumemprof::log {
namespace {

std::atomic<int> g_level{-1};
std::atomic<int> g_budget{-1};

int level() {
    int l = g_level.load(std::memory_order_relaxed);
    if (l >= 0)
        return l;
    // Read directly: logging may be needed before the options are parsed.
    l = 2;
    if (const char* v = std::getenv("GPUMEMPROF_LOG")) {
        std::string s(v);
        if (s == "debug") l = 0;
        else if (s == "info") l = 1;
        else if (s == "error") l = 3;
    }
    int budget = 100;
    if (const char* v = std::getenv("GPUMEMPROF_MAX_WARNINGS")) {
        char* end = nullptr;
        long b = std::strtol(v, &end, 10);
        if (end != v && *end == '\0' && b >= 0)
            budget = static_cast<int>(b);
    }
    g_budget.store(budget, std::memory_order_relaxed);
    g_level.store(l, std::memory_order_relaxed);
    return l;
}

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

bool enabled(Level lv) noexcept {
    return static_cast<int>(lv) >= level();
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
