// SPDX-License-Identifier: MIT
// A library's global destructor frees its 10 device blocks at exit, after the profiler's exit
// handler has run; main leaks one block of its own. Only main's block is a leak.
#include "common.hpp"

#include <cuda_runtime_api.h>

extern "C" int dtor_lib_fill(int n, std::size_t bytes);

int main() {
    MUST(dtor_lib_fill(10, 5 * kMiB + 123));
    void* leaked = nullptr;
    MUST(cudaMalloc(&leaked, kMiB)); // a real leak: never freed
    put("filled", 10);
    return 0;
}
