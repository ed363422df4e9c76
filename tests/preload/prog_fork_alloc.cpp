// SPDX-License-Identifier: MIT
// fork() after many allocations; the child makes one allocation of its own and exits without
// freeing it. The child's report must describe the child alone: one call site, one block.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace {

__attribute__((noinline)) void* parent_alloc(std::size_t bytes) {
    void* p = nullptr;
    MUST(cudaMalloc(&p, bytes));
    return p;
}

__attribute__((noinline)) void* child_alloc(std::size_t bytes) {
    void* p = nullptr;
    MUST(cudaMalloc(&p, bytes));
    return p;
}

} // namespace

int main() {
    std::vector<void*> blocks;
    for (int i = 0; i < 200; ++i)
        blocks.push_back(parent_alloc(64 * 1024));
    for (int i = 0; i < 100; ++i) // half freed before the fork, half live across it
        MUST(cudaFree(blocks[static_cast<std::size_t>(i)]));
    put("parent_pid", getpid());
    pid_t child = fork();
    EXPECT(child >= 0);
    if (child == 0) {
        (void)child_alloc(3 * kMiB); // the child's one allocation, left live at exit
        std::exit(0);
    }
    int status = 0;
    EXPECT(waitpid(child, &status, 0) == child);
    put("child_pid", child);
    put("child_status", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    for (int i = 100; i < 200; ++i)
        MUST(cudaFree(blocks[static_cast<std::size_t>(i)]));
    return 0;
}
