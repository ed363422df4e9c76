// SPDX-License-Identifier: MIT
// Plays the allocations and frees of a GPUMEMPROF_TRACE recording back through cudaMalloc and
// cudaFree at the recorded host times (spinning between events), so that a recording made on a
// GPU can be re-run under the preload on the simulated device, whose events trail the host by
// SIMCUDA_EVENT_DELAY_US. Used by bench/fenced_footprint.py.
//
//   trace_player TRACE [stream]
//
// "stream": a non-blocking stream is created first and given a little work every 1,000 events,
// so that the pool must fence freed blocks (GPUMEMPROF_REUSE=auto) as on the GPU. Every
// allocation is written on the legacy stream (a one-byte memset), as the program's kernels would.
// Prints one JSON line: events played, and how far the player fell behind the recording.
#include "trace/reader.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace {

using Clock = std::chrono::steady_clock;
using gpumemprof::trace::Event;
using gpumemprof::trace::EventType;

bool ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess)
        return true;
    std::fprintf(stderr, "trace_player: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: trace_player TRACE [stream]\n");
        return 2;
    }
    gpumemprof::trace::Reader reader;
    if (!reader.open_file(argv[1])) {
        std::fprintf(stderr, "trace_player: %s\n", reader.error().c_str());
        return 1;
    }
    cudaStream_t side = nullptr;
    void* side_buf = nullptr;
    if (argc > 2 && std::strcmp(argv[2], "stream") == 0) {
        if (!ok(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
            !ok(cudaMalloc(&side_buf, 4096), "cudaMalloc"))
            return 1;
    }
    std::unordered_map<std::uint64_t, void*> live; // recorded address -> ours
    Event ev;
    std::uint64_t first_ns = 0, played = 0;
    double worst_late_ms = 0;
    const Clock::time_point start = Clock::now();
    while (reader.next(ev)) {
        if (ev.type != EventType::alloc && ev.type != EventType::free_requested)
            continue;
        if (played == 0)
            first_ns = ev.time_ns;
        const auto due = start + std::chrono::nanoseconds(ev.time_ns - first_ns);
        while (Clock::now() < due) {
        }
        worst_late_ms = std::max(worst_late_ms, std::chrono::duration<double, std::milli>(Clock::now() - due).count());
        if (ev.type == EventType::alloc) {
            void* p = nullptr;
            if (!ok(cudaMalloc(&p, ev.size), "cudaMalloc"))
                return 1;
            if (!ok(cudaMemsetAsync(p, 1, 1, nullptr), "cudaMemsetAsync"))
                return 1;
            live[ev.ptr] = p;
        } else if (auto it = live.find(ev.ptr); it != live.end()) {
            if (!ok(cudaFree(it->second), "cudaFree"))
                return 1;
            live.erase(it);
        }
        ++played;
        if (side != nullptr && played % 1000 == 0 && !ok(cudaMemsetAsync(side_buf, 2, 4096, side), "side memset"))
            return 1;
    }
    if (reader.failed()) {
        std::fprintf(stderr, "trace_player: %s\n", reader.error().c_str());
        return 1;
    }
    for (auto& [recorded, p] : live)
        cudaFree(p);
    cudaDeviceSynchronize();
    std::printf("{\"events\": %llu, \"worst_late_ms\": %.3f}\n", static_cast<unsigned long long>(played),
                worst_late_ms);
    return 0;
}
