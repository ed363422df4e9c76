// SPDX-License-Identifier: MIT
#include "core/process_state.hpp"

#include <atomic>

namespace gpumemprof::core {
namespace {

std::atomic<bool> g_exiting{false}; // constant-initialised: readable before any constructor runs

} // namespace

bool process_exiting() noexcept {
    return g_exiting.load(std::memory_order_acquire);
}
void set_process_exiting() noexcept {
    g_exiting.store(true, std::memory_order_release);
}

} // namespace gpumemprof::core
