// SPDX-License-Identifier: MIT
// Programs that change what the process is while it runs, for run_process.py: exec() without
// fork, a working directory that moves or goes away, threads still allocating at exit. Each
// prints key=value lines; the same program runs without the preload as the baseline.
#include "../preload/common.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

std::vector<void*> hold(int n, std::size_t bytes) {
    std::vector<void*> out;
    for (int i = 0; i < n; ++i) {
        void* p = nullptr;
        MUST(cudaMalloc(&p, bytes));
        out.push_back(p);
    }
    return out;
}

void release(const std::vector<void*>& blocks) {
    for (void* p : blocks)
        MUST(cudaFree(p));
}

// ---- exec without fork ----------------------------------------------------------------------
// Image 1 holds 5 x 10 MiB and execs this program again (same pid); image 2 allocates and frees
// 1 MiB. With `fail_first`, image 1 first tries to exec a file that does not exist.
int exec_self(const char* self, const std::string& stage, bool fail_first) {
    if (stage == "2") {
        release(hold(1, kMiB));
        put("image2_pid", getpid());
        return 0;
    }
    std::vector<void*> live = hold(5, 10 * kMiB); // still live at the exec: the driver frees them
    put("image1_pid", getpid());
    if (fail_first) {
        const int r = execl("/nonexistent/gpumemprof-test-program", "x", static_cast<char*>(nullptr));
        put("failed_exec", r);
        put("failed_exec_enoent", errno == ENOENT);
        release(hold(2, 4 * kMiB)); // the run goes on after a failed exec
    }
    execl(self, self, "exec_self", "2", static_cast<char*>(nullptr));
    std::printf("FAIL exec: %s\n", std::strerror(errno));
    return 2;
}

// ---- the working directory moves ------------------------------------------------------------
// The first allocation happens in the starting directory; then the program moves into a new
// directory and removes it, so that a name resolved at exit would point nowhere.
int chdir_away() {
    std::vector<void*> a = hold(1, 3 * kMiB);
    EXPECT(mkdir("gone", 0700) == 0);
    EXPECT(chdir("gone") == 0);
    EXPECT(rmdir("../gone") == 0);
    release(hold(1, 2 * kMiB));
    release(a);
    put("done", 1);
    return 0;
}

// ---- threads still allocating at exit -------------------------------------------------------
// Each of 8 threads keeps a window of 32 blocks, freeing the oldest and allocating a new one
// without pause, while main calls exit(): the report must still describe one moment.
int exit_while_allocating() {
    std::atomic<int> started{0};
    for (int t = 0; t < 8; ++t)
        std::thread([&started, t] {
            std::vector<void*> window(32, nullptr);
            for (void*& p : window)
                MUST(cudaMalloc(&p, 4096 * static_cast<std::size_t>(t + 1)));
            started.fetch_add(1);
            for (std::size_t i = 0;; ++i) {
                void*& slot = window[i % window.size()];
                cudaFree(slot);
                if (cudaMalloc(&slot, 4096 * static_cast<std::size_t>(t + 1) + (i % 7) * 512) != cudaSuccess)
                    slot = nullptr;
            }
        }).detach();
    while (started.load() < 8)
        std::this_thread::yield();
    usleep(20000);
    put("exiting", 1);
    std::exit(0);
}

} // namespace

int main(int argc, char** argv) {
    const std::string c = argc > 1 ? argv[1] : "";
    const std::string a2 = argc > 2 ? argv[2] : "";
    if (c == "exec_self")
        return exec_self(argv[0], a2, false);
    if (c == "exec_fail_first")
        return exec_self(argv[0], a2, true);
    if (c == "chdir_away")
        return chdir_away();
    if (c == "exit_while_allocating")
        return exit_while_allocating();
    std::printf("FAIL unknown case %s\n", c.c_str());
    return 2;
}
