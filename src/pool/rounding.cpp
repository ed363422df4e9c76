// SPDX-License-Identifier: MIT
// PyTorch's size rounding (DeviceCachingAllocator::round_size and friends).
#include "pool/rounding.hpp"

#include <bit>
#include <cstdint>

namespace gpumemprof::pool {

// AcceleratorAllocatorConfig::roundup_power2_divisions(size): interval index is
// floor(log2(size)) - 20, clamped to the table, so entry 0 also serves everything below 2 MiB.
std::size_t divisions_for(const AllocConf& conf, std::size_t size) {
    const int log2 = size == 0 ? 0 : static_cast<int>(std::bit_width(size)) - 1;
    int index = log2 - 20;
    if (index < 0)
        index = 0;
    if (index > static_cast<int>(kRoundUpPowerOfTwoIntervals) - 1)
        index = static_cast<int>(kRoundUpPowerOfTwoIntervals) - 1;
    return conf.roundup_power2_divisions[static_cast<std::size_t>(index)];
}

// roundup_power2_next_division: next multiple of (power-of-two floor / divisions).
std::size_t roundup_power2_next_division(std::size_t size, std::size_t divisions) {
    if (size == 0 || std::has_single_bit(size))
        return size;
    if (divisions < 2)
        return size; // PyTorch TORCH_CHECKs divisions >= 2; we never call it otherwise
    const std::size_t floor = std::bit_floor(size);
    // divisions is a power of two (the parser enforces it); a non-power is treated as its floor,
    // as PyTorch's shift by floor(log2(divisions)) does.
    const std::size_t step = floor >> (std::bit_width(divisions) - 1);
    if (step == 0)
        return floor << 1;
    const std::size_t r = size & ~(step - 1);
    return r == size ? r : r + step;
}

std::size_t round_size(const AllocConf& conf, std::size_t size) {
    if (size < kMinBlockSize)
        return kMinBlockSize;
    const std::size_t divisions = divisions_for(conf, size);
    // Why the second test: round_size only uses power-of-two divisions when the request is larger
    // than 512 * divisions, so the steps are never finer than 512 B (1200 B with 4 divisions is
    // 1536, not 1280).
    if (divisions > 1 && size > kMinBlockSize * divisions)
        return roundup_power2_next_division(size, divisions);
    if (size > SIZE_MAX - (kMinBlockSize - 1))
        return SIZE_MAX & ~(kMinBlockSize - 1); // callers reject such sizes before; never wraps
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// get_allocation_size: what one device allocation (segment) for a rounded request is.
std::size_t allocation_size(std::size_t size) {
    if (size <= kSmallSize)
        return kSmallBuffer;
    if (size < kMinLargeAlloc)
        return kLargeBuffer;
    if (size > SIZE_MAX - (kRoundLarge - 1))
        return SIZE_MAX & ~(kRoundLarge - 1);
    return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

} // namespace gpumemprof::pool
