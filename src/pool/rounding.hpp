// SPDX-License-Identifier: MIT
// PyTorch's size rounding: round_size, roundup_power2_next_division, get_allocation_size.
#pragma once

#include "pool/alloc_conf.hpp"

#include <cstddef>

namespace gpumemprof::pool {

inline constexpr std::size_t kMinBlockSize = 512;
inline constexpr std::size_t kSmallSize = 1 * kMiB;
inline constexpr std::size_t kSmallBuffer = 2 * kMiB;
inline constexpr std::size_t kLargeBuffer = 20 * kMiB;
inline constexpr std::size_t kMinLargeAlloc = 10 * kMiB;
inline constexpr std::size_t kRoundLarge = 2 * kMiB;

std::size_t divisions_for(const AllocConf& conf, std::size_t size);
std::size_t roundup_power2_next_division(std::size_t size, std::size_t divisions);
std::size_t round_size(const AllocConf& conf, std::size_t size);
std::size_t allocation_size(std::size_t rounded_size);

} // namespace gpumemprof::pool
