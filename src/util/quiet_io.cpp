// SPDX-License-Identifier: MIT
#include "util/quiet_io.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <initializer_list>
#include <unistd.h>

namespace gpumemprof::util {
namespace {

std::atomic<std::uint64_t> g_written{0}; // lock-free: read by signal handlers

} // namespace

std::uint64_t bytes_written_quietly() noexcept {
    return g_written.load(std::memory_order_relaxed);
}

int write_all_quietly(int fd, const void* data, std::size_t size) noexcept {
    sigset_t ours, old;
    sigemptyset(&ours);
    sigaddset(&ours, SIGPIPE);
    sigaddset(&ours, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &ours, &old);
    sigset_t pending_before;
    sigemptyset(&pending_before);
    sigpending(&pending_before);
    const char* p = static_cast<const char*>(data);
    int err = 0;
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            err = errno;
            break;
        }
        if (n == 0) { // cannot happen for size > 0 on a file; do not spin if it does
            err = EIO;
            break;
        }
        p += n;
        size -= static_cast<std::size_t>(n);
        g_written.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    }
    // EPIPE raises SIGPIPE, EFBIG raises SIGXFSZ, both at this thread: take ours back.
    for (int sig : {SIGPIPE, SIGXFSZ}) {
        if ((sig == SIGPIPE && err != EPIPE) || (sig == SIGXFSZ && err != EFBIG) || sigismember(&pending_before, sig))
            continue;
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&one, nullptr, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return err;
}

} // namespace gpumemprof::util
