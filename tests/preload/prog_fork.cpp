// SPDX-License-Identifier: MIT
// fork() after CUDA use: the child (no CUDA calls) exits normally and writes nothing; the parent reports.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <sys/wait.h>
#include <unistd.h>

int main() {
    void *a, *b, *c;
    MUST(cudaMalloc(&a, kMiB));
    MUST(cudaMalloc(&b, kMiB));
    MUST(cudaFree(b));
    put("parent_pid", getpid());
    pid_t child = fork();
    EXPECT(child >= 0);
    if (child == 0) {
        std::exit(0); // normal exit: at-exit handlers (and the profiler's report) run in the child
    }
    int status = 0;
    EXPECT(waitpid(child, &status, 0) == child);
    put("child_pid", child);
    put("child_status", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    MUST(cudaDeviceSynchronize());
    MUST(cudaMalloc(&c, 1000));
    MUST(cudaFree(c));
    MUST(cudaFree(a));
    return 0;
}
