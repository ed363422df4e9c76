// SPDX-License-Identifier: MIT
// Reports on demand (GPUMEMPROF_DUMP_SIGNAL) and on fatal signals the program does not handle
// (SIGTERM, SIGINT, SIGABRT, SIGQUIT, SIGHUP). A handler never blocks and never touches a file
// descriptor: it sets a flag and posts a semaphore (both async-signal-safe); a helper thread
// writes the reports. A fatal signal that lands on a thread inside the profiler (holding its
// locks) is deferred to the moment that thread leaves the profiler (CoreScope), then re-raised
// with its default action after the reports are written. See docs/guarantees.md.
#pragma once

#include <functional>
#include <pthread.h>

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

namespace detail {
// Per thread (initial-exec: read by the signal handlers, where a lazily allocated TLS block would
// not do; __thread: no TLS wrapper call from other translation units).
extern __thread int t_core_depth __attribute__((tls_model("initial-exec")));    ///< CoreScopes entered
extern __thread int t_core_deferred __attribute__((tls_model("initial-exec"))); ///< a fatal signal waiting
extern __thread int t_core_cancel __attribute__((tls_model("initial-exec")));   ///< the program's cancel state
/// The outermost scope's exit with a deferred fatal signal: reports, then death.
[[noreturn]] void leave_core_fatal() noexcept;
} // namespace detail

/// Marks the calling thread as inside the profiler for the scope's lifetime (nestable): thread
/// cancellation is disabled (no cancellation point can fire under our locks), a fatal signal is
/// deferred to the end of the outermost scope, and exit() called on this thread from a signal
/// handler skips the report rather than wait for a lock the interrupted frame holds. Only the
/// outermost scope changes the cancel state (inline: every hook call enters one).
class CoreScope {
public:
    CoreScope() noexcept {
        if (detail::t_core_depth++ == 0)
            pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &detail::t_core_cancel);
    }
    ~CoreScope() noexcept {
        if (--detail::t_core_depth == 0) {
            if (detail::t_core_deferred != 0) [[unlikely]]
                detail::leave_core_fatal(); // our locks are released now; cancellation stays off
            pthread_setcancelstate(detail::t_core_cancel, nullptr);
        }
    }
    CoreScope(const CoreScope&) = delete;
    CoreScope& operator=(const CoreScope&) = delete;

    /// True when the calling thread is inside a CoreScope (it may hold the profiler's locks).
    static bool inside() noexcept { return detail::t_core_depth > 0; }
};

} // namespace gpumemprof::core
