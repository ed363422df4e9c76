// SPDX-License-Identifier: MIT
#include "core/signals.hpp"

#include "util/atomic_file.hpp"
#include "util/log.hpp"
#include "util/quiet_io.hpp"
#include "util/swallowed.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <semaphore.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace gpumemprof::core {
namespace {

constexpr int kFatal[] = {SIGTERM, SIGINT, SIGABRT, SIGQUIT, SIGHUP};
constexpr unsigned kDumpRequest = 1, kFatalRequest = 2, kDeferredRequest = 4;
// A fatal signal waits this long for its reports, or for a call inside the profiler to return;
// longer while a report is being written and its bytes keep reaching the disk.
constexpr int kFatalWaitMs = 5000;

// The handlers' only tools: an atomic request mask and a semaphore (sem_post is async-signal-safe).
// No file descriptor: the program may close any fd and reuse its number.
sem_t g_wake;
std::atomic<unsigned> g_requests{0};
std::atomic<int> g_done{0}; // bumped by the helper after each dump
std::atomic<bool> g_helper_alive{false};
std::atomic<int> g_deferred_signal{0}; // a fatal signal waiting for a thread to leave the profiler
std::function<void(bool)>* g_dump = nullptr;
DumpSignalState g_dump_state;
constexpr int kExitNotYet = 0, kExitWriting = 1, kExitWritten = 2;
std::atomic<int> g_exit{kExitNotYet}; // the exit report's state

using detail::t_core_deferred;
using detail::t_core_depth;

void request(unsigned what) {
    const int saved = errno;
    if ((g_requests.fetch_or(what) & what) == 0)
        sem_post(&g_wake);
    errno = saved;
}

void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000L * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

[[noreturn]] void die_by(int sig) {
    struct sigaction sa = {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
    _exit(128 + sig); // a default action that does not terminate (cannot happen for kFatal)
}

/// A report being written that makes progress: the exit report, or any report file, with
/// bytes reaching the disk since `*seen` (updated).
bool report_progressing(std::uint64_t* seen) {
    const std::uint64_t now = util::bytes_written_quietly();
    const bool writing = g_exit.load() == kExitWriting || util::files_being_written() > 0;
    const bool moved = now != *seen;
    *seen = now;
    return writing && moved;
}

/// Wait until done() holds: at most kFatalWaitMs, then again for as long as a report being
/// written has made progress in the last kFatalWaitMs.
template <typename Done> void wait_while_progressing(Done done) {
    std::uint64_t seen = util::bytes_written_quietly();
    for (;;) {
        for (int waited = 0; waited < kFatalWaitMs; waited += 10) {
            if (done())
                return;
            sleep_ms(10);
        }
        if (!report_progressing(&seen))
            return;
    }
}

/// Ask the helper for the reports, wait for them, then die of `sig`. During the exit report,
/// wait for that one instead (it is the report), and after it die at once.
[[noreturn]] void fatal_now(int sig) {
    if (g_exit.load() != kExitNotYet) {
        wait_while_progressing([] { return g_exit.load() == kExitWritten; });
    } else if (g_helper_alive.load()) {
        const int before = g_done.load();
        request(kFatalRequest);
        wait_while_progressing([&] { return g_done.load() != before; });
    }
    die_by(sig);
}

void on_dump_signal(int) {
    request(kDumpRequest);
}

void on_fatal_signal(int sig) {
    if (t_core_depth > 0) {
        // This thread was interrupted inside the profiler and may hold a lock the reports need:
        // finish that call first (CoreScope's destructor acts on the signal). The helper kills
        // the process if the call does not come back.
        const int saved = errno;
        t_core_deferred = sig;
        g_deferred_signal.store(sig);
        request(kDeferredRequest);
        errno = saved;
        return;
    }
    fatal_now(sig);
}

/// main() called pthread_exit and every thread of the program has ended: only this helper is
/// left (and the zombie main thread). The process would have exited; do so. No fd is used:
/// /proc/self/task's link count is 2 + threads, and a dead main thread has no exe link.
bool only_helper_left() {
    struct stat st {};
    if (::stat("/proc/self/task", &st) != 0 || st.st_nlink != 4)
        return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/exe", static_cast<int>(::getpid()));
    char buf[8];
    return ::readlink(path, buf, sizeof buf) < 0 && errno == ENOENT;
}

void helper_loop() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    int old = 0;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    struct timespec deferred_deadline = {0, 0};
    std::uint64_t seen = 0;
    for (;;) {
        struct timespec until {};
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += 1;
        if (sem_clockwait(&g_wake, CLOCK_MONOTONIC, &until) != 0) {
            if (errno == ETIMEDOUT && only_helper_left())
                std::exit(0); // what the last thread's pthread_exit does (atexit handlers run)
        }
        const unsigned req = g_requests.exchange(0);
        struct timespec now {};
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (req & kDeferredRequest) {
            deferred_deadline = now;
            deferred_deadline.tv_sec += kFatalWaitMs / 1000;
            seen = util::bytes_written_quietly();
        }
        if (const int sig = g_deferred_signal.load(); sig != 0 && deferred_deadline.tv_sec != 0 &&
                                                      now.tv_sec >= deferred_deadline.tv_sec &&
                                                      report_progressing(&seen)) {
            // The thread is writing a report (the exit report, gpumemprof_dump) that goes on:
            // it acts on the signal when it is done.
            deferred_deadline = now;
            deferred_deadline.tv_sec += kFatalWaitMs / 1000;
        }
        if (const int sig = g_deferred_signal.load();
            sig != 0 && deferred_deadline.tv_sec != 0 && now.tv_sec >= deferred_deadline.tv_sec) {
            // The interrupted call never left the profiler: die as the signal asked, unreported.
            log::warn("signal {} arrived while a thread was inside the profiler ({}), which it has not left for {} "
                      "s: exiting without a report",
                      sig,
                      g_exit.load() == kExitWriting ? "writing the exit report, whose writes have stopped"
                                                    : "a CUDA call, or a report whose writes have stopped",
                      kFatalWaitMs / 1000);
            struct sigaction sa = {};
            sa.sa_handler = SIG_DFL;
            sigemptyset(&sa.sa_mask);
            sigaction(sig, &sa, nullptr);
            ::kill(::getpid(), sig);
        }
        if (req & (kDumpRequest | kFatalRequest)) {
            try {
                if (g_dump)
                    (*g_dump)((req & kFatalRequest) != 0);
            } catch (...) {
                GPUMEMPROF_SWALLOWED();
            }
            g_done.fetch_add(1);
        }
    }
}

/// The helper is born with every signal blocked: a thread inherits its creator's mask, and a
/// fatal signal delivered to the new thread before helper_loop blocks them would make the helper
/// wait for its own reports (seen under load: the process then died without reports).
void start_helper() {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    try {
        std::thread(helper_loop).detach();
    } catch (...) {
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        throw;
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

const char* refuse_reason(int sig) {
    struct sigaction old = {};
    if (sigaction(sig, nullptr, &old) != 0)
        return "it cannot be handled";
    // Our own handler, as a fork child inherits it from its parent, is ours to keep.
    if (!(old.sa_flags & SA_SIGINFO) && (old.sa_handler == on_dump_signal || old.sa_handler == on_fatal_signal))
        return nullptr;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
        return "the program handles it";
    return nullptr;
}

bool install(int sig, void (*fn)(int)) {
    struct sigaction sa = {};
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(sig, &sa, nullptr) == 0;
}

void after_fork_in_child() {
    // The helper thread does not exist in the child: a fatal signal must not wait for it.
    g_helper_alive.store(false);
    g_exit.store(kExitNotYet);
    g_requests.store(0);
    g_deferred_signal.store(0);
    t_core_deferred = 0;
}

} // namespace

namespace detail {

void leave_core_fatal() noexcept {
    const int sig = t_core_deferred;
    t_core_deferred = 0;
    g_deferred_signal.store(0);
    fatal_now(sig);
}

} // namespace detail

DumpSignalState dump_signal_state() noexcept {
    return g_dump_state;
}

void exit_report_begins() noexcept {
    g_exit.store(kExitWriting);
}

void exit_report_ends() noexcept {
    g_exit.store(kExitWritten);
}

void install_signal_handlers(int dump_signal, std::function<void(bool)> dump) noexcept {
    static const int atfork = pthread_atfork(nullptr, nullptr, after_fork_in_child);
    (void)atfork;
    try {
        if (sem_init(&g_wake, 0, 0) != 0)
            return;
        g_requests.store(0);
        delete g_dump;
        g_dump = new std::function<void(bool)>(std::move(dump));
        start_helper();
        g_helper_alive.store(true);
        g_dump_state = DumpSignalState{dump_signal, false, ""};
        if (dump_signal > 0) {
            if (const char* why = refuse_reason(dump_signal)) {
                g_dump_state.why_not = why;
                log::warn("GPUMEMPROF_DUMP_SIGNAL: signal {} is not taken ({}): reports on demand only through "
                          "gpumemprof_dump(); choose a free signal to have them",
                          dump_signal, why);
            } else if (install(dump_signal, on_dump_signal)) {
                g_dump_state.installed = true;
            } else {
                g_dump_state.why_not = "it cannot be handled";
                log::warn("GPUMEMPROF_DUMP_SIGNAL: cannot handle signal {}", dump_signal);
            }
        }
        for (int sig : kFatal)
            if (sig != dump_signal && !refuse_reason(sig))
                install(sig, on_fatal_signal); // only where the program keeps the default action
    } catch (...) {
        log::warn("could not start the report thread: reports only at exit and through gpumemprof_dump()");
    }
}

} // namespace gpumemprof::core
