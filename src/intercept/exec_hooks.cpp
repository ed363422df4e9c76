// SPDX-License-Identifier: MIT
// exec() without fork: the program is replaced and no exit handler runs, so the core writes this
// program's report and closes its trace first (Profiler::exec_image). Every exec function of libc
// is hooked: glibc's execv, execvp, execl... reach execve inside libc, where no preload sees it.
// A raw execve system call is not seen.
#include "core/driver_api.hpp"
#include "core/profiler.hpp"

#include <alloca.h>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>

namespace {

using gpumemprof::core::Profiler;

/// The next definition of `name` after ours (libc's), looked up once. Null when there is none.
template <typename Fn> Fn next(std::atomic<Fn>& slot, const char* name) noexcept {
    Fn f = slot.load(std::memory_order_acquire);
    if (!f) {
        gpumemprof::core::DlsymFn sym = gpumemprof::core::real_dlsym();
        f = sym ? reinterpret_cast<Fn>(sym(RTLD_NEXT, name)) : nullptr;
        slot.store(f, std::memory_order_release);
    }
    return f;
}

// libc's prototypes, spelled out (decltype would carry its nonnull attributes along).
using PathEnvFn = int (*)(const char*, char* const*, char* const*);
using PathFn = int (*)(const char*, char* const*);
using FdEnvFn = int (*)(int, char* const*, char* const*);
using AtFn = int (*)(int, const char*, char* const*, char* const*, int);
std::atomic<PathEnvFn> g_execve{nullptr};
std::atomic<PathFn> g_execv{nullptr};
std::atomic<PathFn> g_execvp{nullptr};
std::atomic<PathEnvFn> g_execvpe{nullptr};
std::atomic<FdEnvFn> g_fexecve{nullptr};
std::atomic<AtFn> g_execveat{nullptr};

/// Calls the real function, or fails with ENOSYS when libc has none (as a missing one would).
template <typename Fn, typename... Args> int call(std::atomic<Fn>& slot, const char* name, Args... args) noexcept {
    Fn f = next(slot, name);
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    return f(args...);
}

/// The arguments of execl/execlp/execle after `arg0`, up to their null, as an argv in `out`
/// (room for `count(arg0, ap) + 1` pointers; on the stack: a vfork child must not allocate).
int count_args(const char* arg0, va_list ap) noexcept {
    int n = 1;
    if (!arg0)
        return 0;
    while (va_arg(ap, const char*) != nullptr)
        if (++n == INT_MAX)
            return -1;
    return n;
}

void fill_args(char** out, int n, const char* arg0, va_list ap) noexcept {
    out[0] = const_cast<char*>(arg0);
    for (int i = 1; i < n; ++i)
        out[i] = va_arg(ap, char*);
    out[n] = nullptr;
}

} // namespace

// The argv of the l-forms is built on the stack (alloca, as glibc's own execl): a vfork child
// must not allocate.
#define GPUMEMPROF_ARGV_FROM_VA(argv, arg0)                                                                            \
    va_list ap;                                                                                                        \
    va_start(ap, arg0);                                                                                                \
    const int argc_ = count_args(arg0, ap);                                                                            \
    va_end(ap);                                                                                                        \
    if (argc_ < 0) {                                                                                                   \
        errno = E2BIG;                                                                                                 \
        return -1;                                                                                                     \
    }                                                                                                                  \
    char** argv = static_cast<char**>(alloca(sizeof(char*) * static_cast<std::size_t>(argc_ + 1)));                    \
    va_start(ap, arg0);                                                                                                \
    fill_args(argv, argc_, arg0, ap)

extern "C" {

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
    return Profiler::instance().exec_image([&] { return call(g_execve, "execve", path, argv, envp); });
}

__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) noexcept {
    return Profiler::instance().exec_image([&] { return call(g_execv, "execv", path, argv); });
}

__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) noexcept {
    return Profiler::instance().exec_image([&] { return call(g_execvp, "execvp", file, argv); });
}

__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
    return Profiler::instance().exec_image([&] { return call(g_execvpe, "execvpe", file, argv, envp); });
}

__attribute__((visibility("default"))) int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
    return Profiler::instance().exec_image([&] { return call(g_fexecve, "fexecve", fd, argv, envp); });
}

__attribute__((visibility("default"))) int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                                                    int flags) noexcept {
    return Profiler::instance().exec_image(
        [&] { return call(g_execveat, "execveat", dirfd, path, argv, envp, flags); });
}

__attribute__((visibility("default"))) int execl(const char* path, const char* arg0, ...) noexcept {
    GPUMEMPROF_ARGV_FROM_VA(argv, arg0);
    va_end(ap);
    return execv(path, argv);
}

__attribute__((visibility("default"))) int execlp(const char* file, const char* arg0, ...) noexcept {
    GPUMEMPROF_ARGV_FROM_VA(argv, arg0);
    va_end(ap);
    return execvp(file, argv);
}

__attribute__((visibility("default"))) int execle(const char* path, const char* arg0, ...) noexcept {
    GPUMEMPROF_ARGV_FROM_VA(argv, arg0);
    char* const* envp = va_arg(ap, char* const*); // after the argument list's null
    va_end(ap);
    return execve(path, argv, envp);
}

} // extern "C"
