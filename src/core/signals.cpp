// SPDX-License-Identifier: MIT
#include "core/signals.hpp"

#include "util/log.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace gpumemprof::core {
namespace {

constexpr int kFatal[] = {SIGTERM, SIGINT, SIGABRT, SIGQUIT, SIGHUP};

int g_pipe[2] = {-1, -1};
std::atomic<int> g_done{0};         // generation counter bumped by the thread after each dump
std::function<void(bool)>* g_dump = nullptr;

void wake(char what) {
    int saved = errno;
    ssize_t n = ::write(g_pipe[1], &what, 1);
    (void)n;
    errno = saved;
}

void on_dump_signal(int) { wake('d'); }

void on_fatal_signal(int sig) {
    // Ask the helper thread for the reports and wait for it (bounded: if the dying thread holds a
    // lock the writer needs, we give up after 5 s rather than hang the program).
    int before = g_done.load();
    wake('f');
    for (int i = 0; i < 500 && g_done.load() == before; ++i) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
    struct sigaction sa = {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
}

void helper_loop() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    for (;;) {
        char c = 0;
        ssize_t n = ::read(g_pipe[0], &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        try {
            if (g_dump)
                (*g_dump)(c == 'f');
        } catch (...) {
        }
        g_done.fetch_add(1);
    }
}

bool install(int sig, void (*fn)(int), bool only_if_default) {
    struct sigaction old = {};
    if (sigaction(sig, nullptr, &old) != 0)
        return false;
    if (only_if_default && (old.sa_flags & SA_SIGINFO || old.sa_handler != SIG_DFL))
        return false; // the program (or its runtime) handles it: leave it alone
    struct sigaction sa = {};
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(sig, &sa, nullptr) == 0;
}

} // namespace

void install_signal_handlers(int dump_signal, std::function<void(bool)> dump) noexcept {
    try {
        if (g_pipe[0] >= 0) {
            ::close(g_pipe[0]);
            ::close(g_pipe[1]);
        }
        if (::pipe2(g_pipe, O_CLOEXEC) != 0)
            return;
        delete g_dump;
        g_dump = new std::function<void(bool)>(std::move(dump));
        std::thread(helper_loop).detach();
        if (dump_signal > 0)
            install(dump_signal, on_dump_signal, false);
        for (int sig : kFatal)
            if (sig != dump_signal)
                install(sig, on_fatal_signal, true);
    } catch (...) {
        log::warn("could not start the report thread: reports only at exit and through gpumemprof_dump()");
    }
}

} // namespace gpumemprof::core
