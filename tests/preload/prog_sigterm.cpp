// SPDX-License-Identifier: MIT
// A program that does not handle SIGTERM: it allocates, says so, then waits to be killed. Under the
// preload the reports must still be written, and the process must still die by SIGTERM.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <unistd.h>

int main() {
    void *a = nullptr, *b = nullptr;
    MUST(cudaMalloc(&a, 1000));
    MUST(cudaMalloc(&b, 3 * kMiB));
    put("ready", 1);
    for (int i = 0; i < 600; ++i) // 60 s at most; the test kills it long before
        ::usleep(100 * 1000);
    put("not_killed", 1);
    return 0;
}
