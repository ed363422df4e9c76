// SPDX-License-Identifier: MIT
// LD_PRELOAD shim of the fault suite: write(2) and pwrite(2) to a file whose path contains
// FAULT_WRITE_MATCH fail with errno FAULT_WRITE_ERRNO (default EIO), as on a failing or full disk.
// With FAULT_WRITE_AFTER=N the first N bytes written to such a file succeed (a disk that fills up).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long long g_written; /* bytes let through to matching files so far */

static int matches(int fd) {
    const char* match = getenv("FAULT_WRITE_MATCH");
    if (!match || !*match)
        return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = '\0';
    return strstr(target, match) != NULL;
}

/* How many of `count` bytes may go through (0: fail now). */
static size_t allowance(int fd, size_t count) {
    if (!matches(fd))
        return count;
    const char* after = getenv("FAULT_WRITE_AFTER");
    long long budget = after ? atoll(after) : 0;
    long long left = budget - __atomic_load_n(&g_written, __ATOMIC_RELAXED);
    if (left <= 0)
        return 0;
    size_t n = count < (size_t)left ? count : (size_t)left;
    __atomic_add_fetch(&g_written, (long long)n, __ATOMIC_RELAXED);
    return n;
}

static int fault_errno(void) {
    const char* e = getenv("FAULT_WRITE_ERRNO");
    return e && atoi(e) > 0 ? atoi(e) : EIO;
}

ssize_t write(int fd, const void* buf, size_t count) {
    static ssize_t (*real)(int, const void*, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
    size_t n = count ? allowance(fd, count) : 0;
    if (count && n == 0) {
        errno = fault_errno();
        return -1;
    }
    return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t off) {
    static ssize_t (*real)(int, const void*, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    size_t n = count ? allowance(fd, count) : 0;
    if (count && n == 0) {
        errno = fault_errno();
        return -1;
    }
    return real(fd, buf, n, off);
}
