// SPDX-License-Identifier: MIT
// What the driver calls a fence is made of cost on this GPU (ns per call, median of 5 rounds of
// 2,000): cuStreamQuery on an idle stream, cuEventRecord on the legacy stream, cuEventQuery of a
// completed event, cuCtxGetCurrent; each with the device idle and with a long kernel running.
// Build: nvcc -O2 -o driver_call_costs driver_call_costs.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

__global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

template <typename F> double per_call_ns(F&& f) {
    std::vector<double> rounds;
    for (int r = 0; r < 5; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 2000; ++i)
            f(i);
        rounds.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 2000);
    }
    std::sort(rounds.begin(), rounds.end());
    return rounds[2];
}

int main() {
    cudaFree(nullptr);
    std::vector<CUstream> streams(32);
    for (auto& s : streams)
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    std::vector<CUevent> events(2000);
    for (auto& e : events)
        cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    for (int busy = 0; busy < 2; ++busy) {
        if (busy)
            spin<<<1, 1>>>(4000000000LL); // ~2 s at 2 GHz: the legacy stream stays busy
        double q = per_call_ns([&](int i) { cuStreamQuery(streams[i % 32]); });
        double rec = per_call_ns([&](int i) { cuEventRecord(events[i], nullptr); });
        double rec_side = per_call_ns([&](int i) { cuEventRecord(events[i], streams[i % 32]); });
        double eq = per_call_ns([&](int i) { cuEventQuery(events[(i + 1000) % 2000]); });
        double cur = per_call_ns([&](int) { CUcontext c; cuCtxGetCurrent(&c); });
        std::printf("{\"device_busy\": %s, \"cuStreamQuery_idle_ns\": %.0f, \"cuEventRecord_legacy_ns\": %.0f, "
                    "\"cuEventRecord_idle_stream_ns\": %.0f, \"cuEventQuery_ns\": %.0f, \"cuCtxGetCurrent_ns\": %.0f}\n",
                    busy ? "true" : "false", q, rec, rec_side, eq, cur);
        std::fflush(stdout);
    }
    cudaDeviceSynchronize();
    return 0;
}
