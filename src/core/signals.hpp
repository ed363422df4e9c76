// SPDX-License-Identifier: MIT
// Reports on demand (GPUMEMPROF_DUMP_SIGNAL) and on fatal signals the program does not handle
// (SIGTERM, SIGINT, SIGABRT, SIGQUIT, SIGHUP). A handler never blocks and never touches a file
// descriptor: it sets a flag and posts a semaphore (both async-signal-safe); a helper thread
// writes the reports. A fatal signal that lands on a thread inside the profiler (holding its
// locks) is deferred to the moment that thread leaves the profiler (core/core_scope.hpp), then
// re-raised with its default action after the reports are written. See docs/guarantees.md.
#pragma once

#include "core/core_scope.hpp"

#include <functional>

namespace gpumemprof::core {

/// What became of GPUMEMPROF_DUMP_SIGNAL (reported in the JSON and the .txt).
struct DumpSignalState {
    int signal = 0;           ///< the signal asked for; 0 = none
    bool installed = false;   ///< our handler was installed
    const char* why_not = ""; ///< when not installed: a short reason
};

/// Install the handlers and start the helper thread. `dump` is called on the helper thread (all
/// signals blocked there); `fatal` is true when the process is about to die. Safe to call again
/// in a fork child. The dump signal is taken only if its disposition is the default one: a
/// handler the program installed (before or after us) is never replaced.
void install_signal_handlers(int dump_signal, std::function<void(bool fatal)> dump) noexcept;

DumpSignalState dump_signal_state() noexcept;

/// The exit report (and the trace's end) is being written / has been written. A fatal signal
/// that comes meanwhile waits for it, as long as it makes progress, and then kills the process
/// (no second report); one that comes after it kills at once.
void exit_report_begins() noexcept;
void exit_report_ends() noexcept;

} // namespace gpumemprof::core
