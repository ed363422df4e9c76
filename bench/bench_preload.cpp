// SPDX-License-Identifier: MIT
// The allocation hot path as a program sees it: cuMemAlloc_v2 + cuMemFree_v2 pairs on a pool
// hit through LD_PRELOAD=libgpumemprof.so (simulated device), against the same calls without the
// preload (the simulated driver's own mmap/munmap), and with 32-frame stack capture on against
// off (goal: capture + interning under 1 us). Each variant runs in a child process of
// this program, so all figures come from one run.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        CUresult r_ = (x);                                                                                             \
        if (r_ != CUDA_SUCCESS) {                                                                                      \
            std::fprintf(stderr, "%s -> %d\n", #x, r_);                                                                \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

double g_result = 0;

// Measure at a fixed call depth so that stack capture sees a known number of frames.
__attribute__((noinline)) void measure(int reps) {
    std::vector<double> medians;
    CUdeviceptr p = 0;
    for (int i = 0; i < 1000; ++i) { // warm up: the pool has its segment, the tree its stack
        CHECK(cuMemAlloc_v2(&p, 1024));
        CHECK(cuMemFree_v2(p));
    }
    for (int r = 0; r < 9; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) {
            CHECK(cuMemAlloc_v2(&p, 1024));
            CHECK(cuMemFree_v2(p));
        }
        auto t1 = std::chrono::steady_clock::now();
        medians.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / reps);
    }
    std::sort(medians.begin(), medians.end());
    g_result = medians[medians.size() / 2];
}

__attribute__((noinline)) void descend(int depth, int reps) {
    if (depth > 0)
        descend(depth - 1, reps);
    else
        measure(reps);
    asm volatile("" ::: "memory"); // keep the recursion a real call chain
}

double run_child(const std::string& self, const std::vector<std::string>& env_extra) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "LD_PRELOAD=", 11) && std::strncmp(*e, "GPUMEMPROF_", 11))
            env.emplace_back(*e);
    env.emplace_back("BENCH_CHILD=1");
    env.emplace_back("GPUMEMPROF_OUTPUT=none");
    for (const auto& e : env_extra)
        env.push_back(e);
    std::vector<char*> envp;
    for (auto& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    char* argv[] = {const_cast<char*>(self.c_str()), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), &fa, nullptr, argv, envp.data()) != 0)
        return -1;
    close(fds[1]);
    char buf[128] = {};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return (n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) ? std::atof(buf) : -1;
}

} // namespace

int main(int argc, char** argv) {
    const int reps = 20000;
    if (std::getenv("BENCH_CHILD")) {
        CHECK(cuInit(0));
        CUdevice dev;
        CUcontext ctx;
        CHECK(cuDeviceGet(&dev, 0));
        CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CHECK(cuCtxSetCurrent(ctx));
        // 24 frames of descend + measure + main + libc start: about 30 frames at the call.
        descend(24, reps);
        std::printf("%.1f\n", g_result);
        return 0;
    }
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_preload LIBGPUMEMPROF\n");
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 2;
    self[n] = 0;
    const std::string pre = std::string("LD_PRELOAD=") + argv[1];
    double raw = run_child(self, {});
    // The pool's own path: no stacks, no model, no memory history (the time series and latest
    // events kept for the HTML report and the pickle, on by default): each is measured on top.
    const std::string no_html = "GPUMEMPROF_HTML=0", no_pickle = "GPUMEMPROF_PICKLE=0";
    double pool = run_child(self, {pre, "GPUMEMPROF_STACK_DEPTH=0", no_html, no_pickle});
    double history = run_child(self, {pre, "GPUMEMPROF_STACK_DEPTH=0"});
    double model = run_child(self, {pre, "GPUMEMPROF_STACK_DEPTH=0", "GPUMEMPROF_MODEL=1", no_html, no_pickle});
    // The stack lines keep the model and the history off, so that their difference to `pool` is
    // capture alone.
    double stacks = run_child(self, {pre, "GPUMEMPROF_STACK_DEPTH=32", "GPUMEMPROF_MODEL=0", no_html, no_pickle});
    double stacks64 = run_child(self, {pre, "GPUMEMPROF_STACK_DEPTH=64"});
    std::printf("cuMemAlloc_v2+cuMemFree_v2 pair, 1 KiB, median ns (simulated device)\n");
    std::printf("  without the preload (simulated driver: mmap/munmap) %10.1f\n", raw);
    std::printf("  through libgpumemprof.so, pool hit (pool alone)     %10.1f   goal < 150   %s\n", pool,
                pool > 0 && pool < 150 ? "met" : "MISSED");
    std::printf("  ... with the memory history (default without stacks) %9.1f   history %.1f ns\n", history,
                history - pool);
    std::printf(
        "  ... with 32-frame stacks                            %10.1f   capture+intern %.1f ns, goal < 1000  %s\n",
        stacks, stacks - pool, stacks > 0 && stacks - pool < 1000 ? "met" : "MISSED");
    std::printf("  ... with the PyTorch-allocator model, no stacks     %10.1f   model %.1f ns\n", model, model - pool);
    std::printf("  ... defaults (64-frame stacks and the model)        %10.1f\n", stacks64);
    std::printf("  ratio raw / pool: %.1fx\n", raw / pool);
    return (raw > 0 && pool > 0 && history > 0 && model > 0 && stacks > 0) ? 0 : 1;
}
