// SPDX-License-Identifier: MIT
// CRC-32 (IEEE 802.3, the zlib/PNG polynomial) with slicing-by-8 tables; no zlib dependency.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumemprof::trace {

/// Continue a CRC: crc32(crc32(0, a), b) == crc32(0, a+b); crc32(0, "123456789") == 0xCBF43926.
std::uint32_t crc32(std::uint32_t crc, const void* data, std::size_t size);

} // namespace gpumemprof::trace
