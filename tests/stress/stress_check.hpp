// SPDX-License-Identifier: MIT
// What the stress programs share: a check that counts failures instead of stopping (the other
// threads must finish), and N workers run beside one observer thread.
#pragma once

#include <cstdio>
#include <thread>
#include <vector>

namespace gpumemprof::stress {

inline int failures = 0;

#define EXPECT(cond)                                                                                                   \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                              \
            ++gpumemprof::stress::failures;                                                                            \
        }                                                                                                              \
    } while (0)

/// Runs worker(0..threads-1) on their own threads beside observer(), and waits for all of them.
template <typename Worker, typename Observer> void run_beside(int threads, Worker&& worker, Observer&& observer) {
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i)
        ts.emplace_back(worker, i);
    std::thread obs(observer);
    for (auto& t : ts)
        t.join();
    obs.join();
}

} // namespace gpumemprof::stress
