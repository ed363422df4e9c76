// SPDX-License-Identifier: MIT
// One rank of a made-up training job, for test_merge.py (run once per rank with RANK set, under
// the preload, on the simulated device). Each allocation comes from a function of its own, so
// each is a call site of its own, keyed by its line:
//   weights     (rank + 1) * 12 MiB        kept to the end
//   activations 16 MiB on every rank       kept to the end
//   expert      rank * 14 MiB, odd ranks   kept to the end
// then all ranks meet (files in DIR); rank 2 asks for more than the device has (one OOM) and tells
// the others, who hold what they have until then; then three steps (gpumemprof_mark_step):
//   step s: step_buffer (s + 1) * 12 MiB, cache_grow 12 MiB (never freed: grows every step),
//           step_buffer freed.
// usage: prog_ranks DIR RANKS
#include "../preload/common.hpp"

#include <gpumemprof/gpumemprof.h>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

__attribute__((noinline)) void* weights(int rank) {
    void* p = nullptr;
    MUST(cudaMalloc(&p, static_cast<std::size_t>(rank + 1) * 12 * kMiB));
    return p;
}

__attribute__((noinline)) void* activations() {
    void* p = nullptr;
    MUST(cudaMalloc(&p, 16 * kMiB));
    return p;
}

__attribute__((noinline)) void* expert(int rank) {
    void* p = nullptr;
    MUST(cudaMalloc(&p, static_cast<std::size_t>(rank) * 14 * kMiB));
    return p;
}

__attribute__((noinline)) void* step_buffer(int step) {
    void* p = nullptr;
    MUST(cudaMalloc(&p, static_cast<std::size_t>(step + 1) * 12 * kMiB));
    return p;
}

__attribute__((noinline)) void* cache_grow() {
    void* p = nullptr;
    MUST(cudaMalloc(&p, 12 * kMiB));
    return p;
}

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

void touch(const std::string& path) {
    if (FILE* f = std::fopen(path.c_str(), "w"))
        std::fclose(f);
}

void wait_for(const std::string& path) {
    for (int i = 0; i < 60000 && !exists(path); ++i)
        ::usleep(1000);
    EXPECT(exists(path));
}

} // namespace

int main(int argc, char** argv) {
    EXPECT(argc == 3);
    const std::string dir = argv[1];
    const int ranks = std::atoi(argv[2]);
    const char* r = std::getenv("RANK");
    EXPECT(r != nullptr);
    const int rank = std::atoi(r);
    std::vector<void*> kept = {weights(rank), activations()};
    if (rank % 2 == 1)
        kept.push_back(expert(rank));
    touch(dir + "/ready." + std::to_string(rank));
    for (int i = 0; i < ranks; ++i)
        wait_for(dir + "/ready." + std::to_string(i));
    if (rank == 2) {
        void* huge = nullptr;
        EXPECT(cudaMalloc(&huge, 4096 * kMiB) == cudaErrorMemoryAllocation);
        (void)cudaGetLastError();
        touch(dir + "/oomed");
    } else {
        wait_for(dir + "/oomed");
    }
    for (int s = 0; s < 3; ++s) {
        EXPECT(gpumemprof_mark_step(s) == s);
        void* t = step_buffer(s);
        kept.push_back(cache_grow());
        MUST(cudaFree(t));
    }
    for (void* p : kept)
        MUST(cudaFree(p));
    return 0;
}
