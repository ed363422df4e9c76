// SPDX-License-Identifier: MIT
// The program of the exit-cost benchmark (bench/exit_cost.py): 2^depth allocations, each from a
// call stack of its own. down() recurses `depth` times and at each level takes one of two call
// sites by one bit of the allocation's number, so the stacks are all distinct (two return
// addresses, 2^depth sequences). One allocation in 16 stays live until the end (leaks at exit,
// live at the peak); the others are freed at once. Prints its resident set just before main
// returns and the monotonic time then: what follows is the exit.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace {

std::vector<void*> g_live;

__attribute__((noinline)) void leaf(unsigned n) {
    void* p = nullptr;
    if (cudaMalloc(&p, 512) != cudaSuccess) {
        std::printf("FAIL cudaMalloc %u\n", n);
        std::exit(2);
    }
    if (n % 16 == 0)
        g_live.push_back(p);
    else
        cudaFree(p);
}

// The asm after each call keeps the two calls apart (distinct return addresses, no tail call).
__attribute__((noinline)) void down(int depth, unsigned bits, unsigned n) {
    if (depth == 0) {
        leaf(n);
        return;
    }
    if (bits & 1) {
        down(depth - 1, bits >> 1, n);
        asm volatile("nop" ::: "memory");
    } else {
        down(depth - 1, bits >> 1, n);
        asm volatile("nop; nop" ::: "memory");
    }
}

long rss_kib() {
    FILE* f = std::fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "VmRSS:", 6) == 0)
            kib = std::atol(line + 6);
    if (f)
        std::fclose(f);
    return kib;
}

} // namespace

int main(int argc, char** argv) {
    const int depth = argc > 1 ? std::atoi(argv[1]) : 20;
    const unsigned count = 1u << depth;
    g_live.reserve(count / 16 + 1);
    for (unsigned n = 0; n < count; ++n)
        down(depth, n, n);
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    std::printf("stacks=%u\nrss_kib=%ld\nexit_start=%.6f\n", count, rss_kib(),
                static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9);
    std::fflush(stdout);
    return 0; // the live blocks are leaks at exit
}
