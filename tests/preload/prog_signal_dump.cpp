// SPDX-License-Identifier: MIT
// Reports on demand: raise the dump signal (GPUMEMPROF_DUMP_SIGNAL, default SIGUSR2) after two
// allocations, wait up to 2 s for <prefix>.json, keep a copy of it, allocate once more and exit
// normally (the exit report then replaces the dump). Run only under the preload: without it,
// SIGUSR2's default action would end the program.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

int main() {
    const char* pattern = std::getenv("GPUMEMPROF_OUTPUT");
    EXPECT(pattern != nullptr);
    std::string prefix = pattern;
    if (auto at = prefix.find("%p"); at != std::string::npos)
        prefix.replace(at, 2, std::to_string(getpid()));
    const std::string json = prefix + ".json";

    void *a = nullptr, *b = nullptr, *c = nullptr;
    MUST(cudaMalloc(&a, 1000));
    MUST(cudaMalloc(&b, 3 * kMiB));
    EXPECT(::access(json.c_str(), F_OK) != 0);
    EXPECT(std::raise(SIGUSR2) == 0);
    int waited_ms = 0;
    while (::access(json.c_str(), F_OK) != 0 && waited_ms < 2000) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        waited_ms += 10;
    }
    put("dump_seen", ::access(json.c_str(), F_OK) == 0);
    // The file is renamed into place when complete (written atomically): copy what the dump said.
    std::ifstream in(json);
    std::stringstream text;
    text << in.rdbuf();
    std::ofstream(prefix + ".dump-copy") << text.str();

    MUST(cudaMalloc(&c, 2000));
    MUST(cudaFree(a));
    MUST(cudaFree(b));
    MUST(cudaFree(c));
    put("survived", 1);
    return 0;
}
