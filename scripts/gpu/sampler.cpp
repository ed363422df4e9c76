// SPDX-License-Identifier: MIT
// A CPU sampler for finding where a profiled program's time goes on the GPU machine, which has
// no perf: LD_PRELOAD=libsampler.so:libgpumemprof.so. Every millisecond of process CPU time
// (a POSIX timer on the process's CPU clock) the interrupted thread's return addresses are kept (glibc backtrace); at
// exit each sample is written as one line of frames to $SAMPLER_OUT: "module!symbol" where dladdr names one, else
// "module+0xoffset" (the profiler's own hidden functions: symbolise those with addr2line against the unstripped build).
// SAMPLER_MODE=wall: every 2 ms of wall-clock time a thread of the sampler's own signals every
// other thread of the process (tgkill), so that a thread that waits (a lock, a system call) is
// sampled where it waits; each line then starts with "tid:N;".
// Built by scripts/gpu/carry.sh; not part of the product.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <string>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

namespace {
constexpr int kDepth = 64;
constexpr int kSamples = 200000;
struct Sample {
    int n;
    int tid;
    void* ip[kDepth];
};
Sample* g_samples = nullptr;
std::atomic<int> g_next{0};
timer_t g_timer = nullptr;

void on_prof(int, siginfo_t*, void*) {
    const int i = g_next.fetch_add(1, std::memory_order_relaxed);
    if (i >= kSamples)
        return;
    g_samples[i].tid = static_cast<int>(syscall(SYS_gettid));
    g_samples[i].n = backtrace(g_samples[i].ip, kDepth);
}

std::atomic<bool> g_stop{false};
int g_sampler_tid = 0;

void wall_loop() {
    g_sampler_tid = static_cast<int>(syscall(SYS_gettid));
    const int pid = getpid();
    while (!g_stop.load(std::memory_order_relaxed)) {
        timespec ts{0, 2000000};
        nanosleep(&ts, nullptr);
        DIR* d = opendir("/proc/self/task");
        if (!d)
            continue;
        while (dirent* e = readdir(d)) {
            const int tid = std::atoi(e->d_name);
            if (tid > 0 && tid != g_sampler_tid)
                syscall(SYS_tgkill, pid, tid, SIGPROF);
        }
        closedir(d);
    }
}

__attribute__((constructor)) void start() {
    g_samples = static_cast<Sample*>(std::calloc(kSamples, sizeof(Sample)));
    void* warm[4];
    backtrace(warm, 4); // loads libgcc_s outside the handler
    struct sigaction sa {};
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, nullptr);
    if (const char* mode = std::getenv("SAMPLER_MODE"); mode && std::strcmp(mode, "wall") == 0) {
        std::thread(wall_loop).detach();
        return;
    }
    // A POSIX timer, not setitimer's: it dies with exec, before the next image has a handler.
    sigevent ev{};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGPROF;
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &g_timer) != 0)
        return;
    itimerspec t{{0, 1000000}, {0, 1000000}};
    timer_settime(g_timer, 0, &t, nullptr);
}

__attribute__((destructor)) void finish() {
    if (g_timer)
        timer_delete(g_timer);
    g_stop.store(true);
    const char* path = std::getenv("SAMPLER_OUT");
    if (!path)
        return;
    char name[64];
    std::snprintf(name, sizeof name, "%s.%d", path, static_cast<int>(getpid()));
    std::FILE* f = std::fopen(name, "w");
    if (!f)
        return;
    const int n = std::min(g_next.load(), kSamples);
    if (n == 0) {
        std::fclose(f);
        std::remove(name);
        return;
    }
    std::unordered_map<void*, std::string> names; // dladdr is slow in big modules: once an address
    char buf[512];
    const bool wall = g_sampler_tid != 0;
    for (int i = 0; i < n; ++i) {
        if (wall)
            std::fprintf(f, "tid:%d;", g_samples[i].tid);
        for (int k = 1; k < g_samples[i].n; ++k) { // frame 0 is the handler
            void* ip = g_samples[i].ip[k];
            auto it = names.find(ip);
            if (it == names.end()) {
                Dl_info info{};
                if (dladdr(ip, &info) && info.dli_fname) {
                    const char* base = std::strrchr(info.dli_fname, '/');
                    base = base ? base + 1 : info.dli_fname;
                    const auto off =
                        reinterpret_cast<std::uintptr_t>(ip) - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
                    if (info.dli_sname && !std::strstr(base, "gpumemprof"))
                        std::snprintf(buf, sizeof buf, "%s!%s", base, info.dli_sname);
                    else
                        std::snprintf(buf, sizeof buf, "%s+0x%lx", base, static_cast<unsigned long>(off));
                } else {
                    std::snprintf(buf, sizeof buf, "?");
                }
                it = names.emplace(ip, buf).first;
            }
            std::fputs(it->second.c_str(), f);
            std::fputc(';', f);
        }
        std::fputc('\n', f);
    }
    std::fclose(f);
}
} // namespace
