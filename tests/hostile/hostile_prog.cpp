// SPDX-License-Identifier: MIT
// Programs that are hostile but fair to a library living inside them: one
// executable, one case per argument. Each prints key=value lines that run_hostile.py checks; the
// same program runs without the preload as the baseline.
#include "../preload/common.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <string>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

void churn(int n, std::size_t bytes = kMiB) {
    for (int i = 0; i < n; ++i) {
        void* p = nullptr;
        MUST(cudaMalloc(&p, bytes + static_cast<std::size_t>(i % 97) * 4096));
        MUST(cudaFree(p));
    }
}

double now_s() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// ---- fork: the child of a multi-threaded CUDA program exits -------------------------------------
// A second thread allocates host memory without pause, so that fork() often lands while it holds
// an allocator lock; each child only calls exit(0). A child that hangs is killed and counted.
int fork_storm(int forks) {
    void* keep = nullptr;
    MUST(cudaMalloc(&keep, kMiB));
    std::atomic<bool> stop{false};
    std::thread busy([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            void* volatile p = std::malloc(64 + (reinterpret_cast<std::uintptr_t>(&p) & 255));
            std::free(p);
        }
    });
    int hung = 0;
    for (int i = 0; i < forks; ++i) {
        churn(2); // fenced frees: the simulated device's stream worker runs beside the fork too
        const pid_t child = fork();
        EXPECT(child >= 0);
        if (child == 0)
            std::exit(0);
        int status = 0;
        const double deadline = now_s() + 15;
        pid_t r = 0;
        while ((r = waitpid(child, &status, WNOHANG)) == 0 && now_s() < deadline)
            usleep(1000);
        if (r == 0) {
            ++hung;
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
        } else {
            EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
    }
    stop = true;
    busy.join();
    MUST(cudaFree(keep));
    put("forks", forks);
    put("hung_children", hung);
    return 0;
}

// ---- fds: the program closes every fd and reuses the numbers ------------------------------------
int fds(const char* data_path) {
    churn(10);                             // the trace (if any) is open, the report thread and handlers are installed
    syscall(SYS_close_range, 3u, ~0u, 0u); // a daemon closes everything it did not open itself
    for (int fd = 3; fd < 1024; ++fd)
        close(fd);
    const int data = open(data_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    EXPECT(data == 3);
    const char text[] = "the program's own data\n";
    EXPECT(write(data, text, sizeof text - 1) == static_cast<ssize_t>(sizeof text - 1));
    // dup2 the data file over every low number the library could have used.
    for (int fd = 4; fd < 64; ++fd)
        EXPECT(dup2(data, fd) == fd);
    churn(3000);    // several trace blocks
    raise(SIGUSR2); // the dump signal's handler runs
    usleep(300 * 1000);
    churn(3000);
    put("data_bytes", lseek(data, 0, SEEK_END));
    put("done", 1);
    return 0;
}

// ---- stderr: the program closes fd 2 and opens a data file there --------------------------------
int stderr_file(const char* data_path) {
    churn(10);
    close(2);
    const int data = open(data_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT(data == 2);
    const char text[] = "the program's own data\n";
    EXPECT(write(data, text, sizeof text - 1) == static_cast<ssize_t>(sizeof text - 1));
    churn(10);
    put("done", 1);
    return 0; // the exit report cannot be written (its directory is missing): a warning
}

// ---- signals ------------------------------------------------------------------------------------
// A storm of the dump signal from another process while the program allocates (item 4).
int usr2_storm(double seconds) {
    churn(1); // the profiler is set up (its handler installed) before the storm starts
    const pid_t parent = getpid();
    const pid_t sender = fork();
    EXPECT(sender >= 0);
    if (sender == 0) {
        const double end = now_s() + seconds;
        long sent = 0;
        while (now_s() < end && kill(parent, SIGUSR2) == 0)
            ++sent;
        _exit(0);
    }
    const double end = now_s() + seconds + 0.5;
    long rounds = 0;
    while (now_s() < end) {
        churn(10);
        ++rounds;
    }
    int status = 0;
    waitpid(sender, &status, 0);
    put("rounds", rounds);
    put("done", 1);
    return 0;
}

// exit() from a signal handler while the main loop allocates (item 5).
void exit_now(int) {
    std::exit(7);
}
int exit_in_handler() {
    struct sigaction sa = {};
    sa.sa_handler = exit_now;
    sigaction(SIGALRM, &sa, nullptr);
    itimerval t = {};
    t.it_value.tv_usec = 150 * 1000;
    setitimer(ITIMER_REAL, &t, nullptr);
    for (;;)
        churn(100);
}

// Keeps allocating until killed (item 6).
int alloc_forever() {
    churn(1);
    put("ready", 1);
    for (;;)
        churn(100);
}

// The program's own dump-signal handler, installed before any CUDA call (item 7).
std::atomic<int> g_own_handler_runs{0};
void own_handler(int) {
    g_own_handler_runs.fetch_add(1);
}
int own_usr2() {
    struct sigaction sa = {};
    sa.sa_handler = own_handler;
    sigaction(SIGUSR2, &sa, nullptr);
    churn(5);
    raise(SIGUSR2);
    put("own_handler_runs", g_own_handler_runs.load());
    return 0;
}

// ---- limits, pipes, cancellation, lifetimes -----------------------------------------------------
int fsize(long limit, int allocations) {
    rlimit rl{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
    EXPECT(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    std::vector<void*> live;
    for (int i = 0; i < allocations; ++i) {
        void* p = nullptr;
        MUST(cudaMalloc(&p, 4096 + static_cast<std::size_t>(i) * 512)); // kept: leaks at exit
        live.push_back(p);
    }
    churn(allocations * 400);
    std::printf("buffered stdout survives\n"); // no fflush: written at exit, after our report
    return 0;
}

int cancel_thread() {
    std::atomic<long> rounds{0};
    pthread_t t;
    auto body = [](void* arg) -> void* {
        int old = 0;
        pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
        auto* n = static_cast<std::atomic<long>*>(arg);
        for (;;) {
            churn(50);
            n->fetch_add(1);
            pthread_testcancel();
        }
    };
    EXPECT(pthread_create(&t, nullptr, body, &rounds) == 0);
    while (rounds.load() < 5)
        usleep(1000);
    usleep(50 * 1000);
    EXPECT(pthread_cancel(t) == 0);
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 20;
    void* ret = nullptr;
    const int r = pthread_timedjoin_np(t, &ret, &deadline);
    put("joined", r == 0 && ret == PTHREAD_CANCELED);
    if (r != 0)
        _exit(4); // the cancelled thread holds a lock forever: do not hang at exit too
    churn(10);    // the locks the cancelled thread used are free
    put("done", 1);
    return 0;
}

// A cancellation request is already pending (deferred) when the thread calls into CUDA: every
// call below reaches a cancellation point inside the library (a warning written to stderr, the
// out-of-memory notice and warning written under the pool's lock, the trace, the first
// symbolisation of gpumemprof_snapshot_json, the reports of gpumemprof_dump). Deferred
// cancellation must take effect at the program's own cancellation point, pthread_testcancel, not
// inside the library (a forced unwind through its frames would abort the process or leave its
// locks held). Without the preload the same calls reach none.
const char* g_cancel_dump_prefix = nullptr;

// The calls of cancel_pending, in a frame of their own that has returned before the thread is
// cancelled (ASan reports a thread whose forced unwind skipped its locals' redzones).
__attribute__((noinline)) void calls_with_cancel_pending() {
    void* keep = nullptr;
    MUST(cudaMalloc(&keep, kMiB)); // the library's first use (trace, threads) before the cancel
    EXPECT(pthread_cancel(pthread_self()) == 0);
    churn(20);
    void* p = nullptr;
    MUST(cudaMalloc(&p, kMiB));
    MUST(cudaFree(p));
    EXPECT(cudaFree(p) != cudaSuccess); // a double free: the library warns
    void* huge = nullptr;
    EXPECT(cudaMalloc(&huge, std::size_t{1} << 50) != cudaSuccess); // out of memory: reported
    using SnapshotFn = std::size_t (*)(char*, std::size_t);
    if (auto snap = reinterpret_cast<SnapshotFn>(dlsym(RTLD_DEFAULT, "gpumemprof_snapshot_json")))
        EXPECT(snap(nullptr, 0) > 0); // the first symbolisation: reads the ELF files
    using DumpFn = int (*)(const char*);
    if (auto dump = reinterpret_cast<DumpFn>(dlsym(RTLD_DEFAULT, "gpumemprof_dump")))
        EXPECT(dump(g_cancel_dump_prefix) == 0); // writes the report files
    churn(20);
    MUST(cudaFree(keep));
}

int cancel_pending(const char* dump_prefix) {
    static std::atomic<int> reached{0};
    g_cancel_dump_prefix = dump_prefix;
    pthread_t t;
    auto body = [](void*) -> void* {
        calls_with_cancel_pending();
        reached.store(1);
        pthread_testcancel(); // the program's own cancellation point: the request takes effect here
        reached.store(2);
        return nullptr;
    };
    EXPECT(pthread_create(&t, nullptr, body, nullptr) == 0);
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 20;
    void* ret = nullptr;
    const int r = pthread_timedjoin_np(t, &ret, &deadline);
    put("joined", r == 0);
    if (r != 0)
        _exit(4);
    put("cancelled", ret == PTHREAD_CANCELED);
    put("reached", reached.load()); // 1: every call returned, the cancel took effect at testcancel
    churn(10);                      // the library's locks are free
    put("done", 1);
    return 0;
}

int pthread_exit_main() {
    churn(5);
    std::thread([] {
        usleep(200 * 1000);
        churn(5);
    }).detach();
    put("main_exits", 1);
    pthread_exit(nullptr);
}

int quick_exit_case() {
    void* p = nullptr;
    MUST(cudaMalloc(&p, 3 * kMiB));
    put("quick_exit", 1);
    std::quick_exit(3);
}

// Tries to make the library write where it should not: symlinks planted at the names of the
// report's temporary files (names the library would have used) before the exit report.
int plant(const char* prefix, const char* victim) {
    churn(5);
    int planted = 0;
    for (const char* ext : {".json", ".txt", ".folded", ".alloc.folded"})
        for (int n = 0; n < 6; ++n) {
            const std::string tmp = std::string(prefix) + ext + ".tmp." + std::to_string(getpid()) +
                                    (n == 0 ? std::string() : "." + std::to_string(n - 1));
            planted += symlink(victim, tmp.c_str()) == 0;
        }
    put("planted", planted);
    return 0;
}

int system_child() {
    churn(300);
    EXPECT(std::system("true") == 0);
    churn(300);
    put("done", 1);
    return 0;
}

// ---- many call sites, so that the exit report takes a while to write ----------------------------
// 2^depth allocations from as many distinct stacks (two call sites a level), then exit.
__attribute__((noinline)) void unique_down(int depth, unsigned bits) {
    if (depth == 0) {
        churn(1, 4096);
        return;
    }
    if (bits & 1) {
        unique_down(depth - 1, bits >> 1);
        asm volatile("nop" ::: "memory");
    } else {
        unique_down(depth - 1, bits >> 1);
        asm volatile("nop; nop" ::: "memory");
    }
}

int unique_stacks(int depth) {
    for (unsigned n = 0; n < (1u << depth); ++n)
        unique_down(depth, n);
    put("done", 1);
    return 0;
}

// ---- one GPUMEMPROF_TRACE, two processes that use CUDA ------------------------------------------
// The parent allocates, starts a second CUDA process by `how`, waits for it to finish, allocates
// again. The second process records into <trace>.<its pid>: the parent's trace stays whole.
extern "C" char** environ;

int share_trace(const char* self, const std::string& how) {
    churn(200);
    char* child_argv[] = {const_cast<char*>(self), const_cast<char*>("churn"), const_cast<char*>("150"), nullptr};
    pid_t child = -1;
    if (how == "posix_spawn") {
        EXPECT(posix_spawn(&child, self, nullptr, nullptr, child_argv, environ) == 0);
    } else if (how == "vfork") {
        child = vfork();
        if (child == 0) {
            execv(self, child_argv);
            _exit(127);
        }
    } else if (how == "fork_alloc") {
        child = fork();
        if (child == 0) {
            churn(150); // a fork child (no exec) that allocates: it opens a trace of its own
            std::exit(0);
        }
    } else if (how == "daemon") {
        // A daemon made the usual way: fork, setsid, fork again; the grandchild allocates after its
        // parent has exited. Its end is seen as the end of a pipe it holds.
        int done[2];
        EXPECT(pipe(done) == 0);
        child = fork();
        if (child == 0) {
            setsid();
            if (fork() == 0) {
                close(done[0]);
                churn(150);
                std::exit(0); // closes done[1]
            }
            _exit(0);
        }
        close(done[1]);
        char c;
        int status = 0;
        EXPECT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        for (ssize_t n = 1; n != 0;)
            n = read(done[0], &c, 1); // 0 at the grandchild's exit (EINTR: -1, read again)
        close(done[0]);
        churn(200);
        put("done", 1);
        return 0;
    } else {
        std::printf("FAIL unknown share_trace mode %s\n", how.c_str());
        return 2;
    }
    EXPECT(child > 0);
    int status = 0;
    EXPECT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    churn(200);
    put("done", 1);
    return 0;
}

// One of `peers` processes a shell started at once with the same GPUMEMPROF_TRACE (ranks of a
// launcher): each allocates, says so with a file in `dir`, waits until every peer has, allocates
// again. So all of them are alive while each opens the trace.
int trace_peer(const char* dir, int peers) {
    churn(100);
    const std::string mine = std::string(dir) + "/ready." + std::to_string(getpid());
    const int fd = open(mine.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    EXPECT(fd >= 0);
    close(fd);
    const double deadline = now_s() + 30;
    for (;;) {
        int ready = 0;
        DIR* d = opendir(dir);
        EXPECT(d != nullptr);
        while (const dirent* e = readdir(d))
            ready += std::strncmp(e->d_name, "ready.", 6) == 0;
        closedir(d);
        if (ready >= peers)
            break;
        EXPECT(now_s() < deadline);
        usleep(2000);
    }
    churn(100);
    put("done", 1);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const std::string c = argc > 1 ? argv[1] : "";
    const char* a2 = argc > 2 ? argv[2] : "";
    const char* a3 = argc > 3 ? argv[3] : "";
    if (c == "fork_storm")
        return fork_storm(std::atoi(a2));
    if (c == "fds")
        return fds(a2);
    if (c == "stderr_file")
        return stderr_file(a2);
    if (c == "usr2_storm")
        return usr2_storm(std::atof(a2));
    if (c == "exit_in_handler")
        return exit_in_handler();
    if (c == "alloc_forever")
        return alloc_forever();
    if (c == "own_usr2")
        return own_usr2();
    if (c == "fsize")
        return fsize(std::atol(a2), std::atoi(a3));
    if (c == "cancel")
        return cancel_thread();
    if (c == "cancel_pending")
        return cancel_pending(a2);
    if (c == "pthread_exit_main")
        return pthread_exit_main();
    if (c == "quick_exit")
        return quick_exit_case();
    if (c == "plant")
        return plant(a2, a3);
    if (c == "system_child")
        return system_child();
    if (c == "unique_stacks")
        return unique_stacks(std::atoi(a2));
    if (c == "share_trace")
        return share_trace(argv[0], a2);
    if (c == "trace_peer")
        return trace_peer(a2, std::atoi(a3));
    if (c == "churn") {
        churn(std::atoi(a2));
        put("done", 1);
        return 0;
    }
    std::printf("FAIL unknown case %s\n", c.c_str());
    return 2;
}
