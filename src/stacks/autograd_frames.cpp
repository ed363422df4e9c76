// SPDX-License-Identifier: MIT
#include "stacks/autograd_frames.hpp"

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace gpumemprof::stacks::autograd {
namespace {

std::mutex& table_mutex() {
    static std::mutex* m = new std::mutex(); // leaked: used during teardown
    return *m;
}
std::vector<std::string>& names() {
    static auto* v = new std::vector<std::string>();
    return *v;
}

} // namespace

std::uint32_t node_name_id(const char* name) noexcept {
    try {
        std::lock_guard lock(table_mutex());
        auto& v = names();
        for (std::size_t i = 0; i < v.size(); ++i)
            if (v[i] == name)
                return static_cast<std::uint32_t>(i);
        v.emplace_back(name);
        return static_cast<std::uint32_t>(v.size() - 1);
    } catch (...) {
        return 0xffffffffu;
    }
}

std::string node_name(std::uintptr_t word) {
    const auto id = static_cast<std::uint32_t>(word & 0xffffffffu);
    std::lock_guard lock(table_mutex());
    const auto& v = names();
    return id < v.size() ? v[id] : std::string("?");
}

bool matched(std::uintptr_t word) noexcept {
    return (word & kUnmatched) == 0;
}

void lock_for_fork() noexcept {
    table_mutex().lock();
}
void unlock_after_fork() noexcept {
    table_mutex().unlock();
}

} // namespace gpumemprof::stacks::autograd
