// SPDX-License-Identifier: MIT
#include "core/process_state.hpp"

#include <atomic>
#include <ctime>

namespace gpumemprof::core {
namespace {

// Constant-initialised: readable before any constructor runs.
std::atomic<bool> g_exiting{false};
std::atomic<bool> g_frozen{false};
std::atomic<int> g_late_updates{0}; ///< LateUpdates in progress

} // namespace

bool process_exiting() noexcept {
    return g_exiting.load(std::memory_order_acquire);
}
void set_process_exiting() noexcept {
    g_exiting.store(true, std::memory_order_release);
}

// Sequentially consistent on both sides: an update either sees the freeze or is counted before
// freeze_state reads the count.
void LateUpdate::enter() noexcept {
    g_late_updates.fetch_add(1, std::memory_order_seq_cst);
    registered_ = true;
    allowed_ = !g_frozen.load(std::memory_order_seq_cst);
}

void LateUpdate::leave() noexcept {
    g_late_updates.fetch_sub(1, std::memory_order_seq_cst);
}

void freeze_state() noexcept {
    g_frozen.store(true, std::memory_order_seq_cst);
    // An update in progress finishes first (they take microseconds); one that does not within
    // the bound (its thread stopped by the program) is not waited for.
    for (int i = 0; i < 500 && g_late_updates.load(std::memory_order_seq_cst) > 0; ++i) {
        timespec ms{0, 1000 * 1000};
        nanosleep(&ms, nullptr);
    }
}

bool state_frozen() noexcept {
    return g_frozen.load(std::memory_order_acquire);
}

} // namespace gpumemprof::core
