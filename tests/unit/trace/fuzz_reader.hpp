// SPDX-License-Identifier: MIT
// Shared by the libFuzzer target and the deterministic mutation test: read one input fully.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumemprof::trace::fuzz {

/// Recompute the header and block CRCs in place, as far as the lengths let the walk go, so that
/// mutations reach the event decoder instead of stopping at the first checksum.
void repair_crcs(std::vector<std::uint8_t>& bytes);

/// Read `data` as a trace, as-is and CRC-repaired. Returns the number of events read from the
/// as-is input. Checks the reader's own promises and calls __builtin_trap() when one is broken
/// (an error without "byte offset N: " prefix, an offset beyond the data).
std::uint64_t read_all(const std::uint8_t* data, std::size_t size);

} // namespace gpumemprof::trace::fuzz
