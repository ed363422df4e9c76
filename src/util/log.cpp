// SPDX-License-Identifier: MIT
#include "util/log.hpp"

#include "util/quiet_io.hpp"

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <memory>

namespace gpumemprof::log {
namespace {

// Defaults until configure() runs with the parsed GPUMEMPROF_LOG / GPUMEMPROF_MAX_WARNINGS.
std::atomic<int> g_level{static_cast<int>(Level::warning)};
std::atomic<int> g_budget{100};

/// stderr through write(2) on fd 2, raising no SIGPIPE when stderr is a pipe whose reader left
/// (a warning must not kill the program). The line is dropped then.
class QuietStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t line;
        formatter_->format(msg, line);
        (void)util::write_all_quietly(2, line.data(), line.size());
    }
    void flush_() override {}
};

spdlog::logger* logger() {
    // Never destroyed: warnings may be written while the process tears down static objects.
    static spdlog::logger* l = [] {
        auto sink = std::make_shared<QuietStderrSink>();
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
