// SPDX-License-Identifier: MIT
// The calling thread is inside the profiler: every entry (hook, C API function, exit handler)
// holds a CoreScope for its duration. Thread cancellation is off meanwhile, a fatal signal waits
// for the outermost scope's end (core/signals.hpp), and exit() from a signal handler that
// interrupted a scope skips the report. See docs/guarantees.md.
#pragma once

#include <pthread.h>

namespace gpumemprof::core {

namespace detail {
// Per thread (initial-exec: read by the signal handlers, where a lazily allocated TLS block would
// not do; __thread: no TLS wrapper call from other translation units).
extern __thread int t_core_depth __attribute__((tls_model("initial-exec")));    ///< CoreScopes entered
extern __thread int t_core_deferred __attribute__((tls_model("initial-exec"))); ///< a fatal signal waiting
extern __thread int t_core_cancel __attribute__((tls_model("initial-exec")));   ///< the program's cancel state
/// The outermost scope's exit with a deferred fatal signal: reports, then death (core/signals.cpp).
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
