// SPDX-License-Identifier: MIT
#include "util/swallowed.hpp"

#include "util/log.hpp"

#include <atomic>
#include <cstring>

namespace gpumemprof::util {
namespace {
std::atomic<std::uint64_t> g_count{0};
} // namespace

void swallowed(const char* file, int line) noexcept {
    g_count.fetch_add(1, std::memory_order_relaxed);
    if (!log::enabled(log::Level::debug))
        return;
    const char* slash = file ? std::strrchr(file, '/') : nullptr;
    log::debug("an exception was caught at {}:{} inside the profiler; the program goes on",
               slash ? slash + 1 : (file ? file : "?"), line);
}

std::uint64_t swallowed_count() noexcept {
    return g_count.load(std::memory_order_relaxed);
}

} // namespace gpumemprof::util
