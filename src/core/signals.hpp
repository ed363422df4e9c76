// SPDX-License-Identifier: MIT
// Reports on demand (GPUMEMPROF_DUMP_SIGNAL) and on fatal signals the program does not handle
// (SIGTERM, SIGINT, SIGABRT, SIGQUIT, SIGHUP): the handler only wakes a helper thread, which
// writes the reports; a fatal signal is then re-raised with its default action.
#pragma once

#include <functional>

namespace gpumemprof::core {

/// Install the handlers. `dump` is called on the helper thread (all signals blocked there);
/// `fatal` is true when the process is about to die. Safe to call again in a fork child.
void install_signal_handlers(int dump_signal, std::function<void(bool fatal)> dump) noexcept;

} // namespace gpumemprof::core
