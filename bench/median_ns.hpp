// SPDX-License-Identifier: MIT
// The median time of one call of f, in ns, over 300 batches of 200 calls (the benchmarks of warm
// stack walks: bench_capture, torch_search).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace gpumemprof::bench {

template <typename F> double median_ns(F&& f) {
    constexpr int kBatch = 200, kBatches = 300;
    using Clock = std::chrono::steady_clock;
    std::vector<double> per_call;
    per_call.reserve(kBatches);
    for (int b = 0; b < kBatches; ++b) {
        const auto t0 = Clock::now();
        for (int i = 0; i < kBatch; ++i)
            f();
        const auto t1 = Clock::now();
        per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatch);
    }
    std::nth_element(per_call.begin(), per_call.begin() + kBatches / 2, per_call.end());
    return per_call[kBatches / 2];
}

} // namespace gpumemprof::bench
