// SPDX-License-Identifier: MIT
// LD_PRELOAD shim of hostile_sigterm_at_exit: a disk that is slow but works. write(2) to a file
// whose path contains ".tmp." (a report being written) writes at most 64 KiB per call and, for
// the first SLOW_WRITES (default 30) such calls, sleeps SLOW_WRITE_MS (default 300) ms first.
// With SLOW_WRITE_SIGTERM=1 the first such call sends the process SIGTERM: the signal lands in
// the middle of the exit report.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_calls; /* slowed calls so far */

static int report_file(int fd) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = '\0';
    return strstr(target, ".tmp.") != NULL;
}

static int env_int(const char* name, int dflt) {
    const char* v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

ssize_t write(int fd, const void* buf, size_t count) {
    static ssize_t (*real)(int, const void*, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
    if (count == 0 || !report_file(fd))
        return real(fd, buf, count);
    const int call = __atomic_fetch_add(&g_calls, 1, __ATOMIC_RELAXED);
    if (call == 0 && env_int("SLOW_WRITE_SIGTERM", 0))
        kill(getpid(), SIGTERM);
    if (call < env_int("SLOW_WRITES", 30)) {
        const int ms = env_int("SLOW_WRITE_MS", 300);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    return real(fd, buf, count < 65536 ? count : 65536);
}
