// SPDX-License-Identifier: MIT
#include "util/log.hpp"

#include "util/quiet_io.hpp"

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <memory>
#include <sys/stat.h>

namespace gpumemprof::log {
namespace {

// Defaults until configure() runs with the parsed GPUMEMPROF_LOG / GPUMEMPROF_MAX_WARNINGS.
std::atomic<int> g_level{static_cast<int>(Level::warning)};
std::atomic<int> g_budget{100};

/// What fd 2 was when the library was loaded: the stderr the process was started with.
struct StderrIdentity {
    bool open = false;
    unsigned long long dev = 0, ino = 0;
};
StderrIdentity g_stderr;

StderrIdentity identity_of_fd2() {
    struct stat st {};
    if (::fstat(2, &st) != 0)
        return {};
    return {true, static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino)};
}

// Before the program's main (and before the other constructors of this library).
__attribute__((constructor(101))) void remember_stderr() {
    g_stderr = identity_of_fd2();
}

/// stderr through write(2) on fd 2, raising no SIGPIPE when stderr is a pipe whose reader left
/// (a warning must not kill the program). The line is dropped then.
class QuietStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        spdlog::memory_buf_t line;
        formatter_->format(msg, line);
        to_stderr(std::string_view(line.data(), line.size()));
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

void to_stderr(std::string_view text) noexcept {
    // The program may have closed stderr and opened a file of its own as fd 2: our lines would
    // land in its data. Only the stderr we started with gets them (the same file: device and
    // inode); otherwise they are dropped.
    const StderrIdentity now = identity_of_fd2();
    if (!g_stderr.open || !now.open || now.dev != g_stderr.dev || now.ino != g_stderr.ino)
        return;
    (void)util::write_all_quietly(2, text.data(), text.size());
}

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
