// SPDX-License-Identifier: MIT
// Helpers shared by the preload case programs: fail-fast checks and key=value output for run_case.py.
#pragma once

#include <cstdio>
#include <cstdlib>

/// A CUDA call that must succeed (runtime or driver: both use 0 for success).
#define MUST(x)                                                                                                        \
    do {                                                                                                               \
        long long r_ = static_cast<long long>(x);                                                                      \
        if (r_ != 0) {                                                                                                 \
            std::printf("FAIL %s:%d: %s returned %lld\n", __FILE__, __LINE__, #x, r_);                                 \
            std::fflush(stdout);                                                                                       \
            std::_Exit(2);                                                                                             \
        }                                                                                                              \
    } while (0)

#define EXPECT(c)                                                                                                      \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                                   \
            std::fflush(stdout);                                                                                       \
            std::_Exit(3);                                                                                             \
        }                                                                                                              \
    } while (0)

/// One result line "key=value" that run_case.py reads.
inline void put(const char* key, long long value) {
    std::printf("%s=%lld\n", key, value);
    std::fflush(stdout);
}

inline constexpr unsigned long long kMiB = 1ull << 20;
