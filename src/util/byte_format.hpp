// SPDX-License-Identifier: MIT
// Human-readable byte counts: the one formatter, in the conventions our outputs imitate, and the
// one parser of a size a user writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpumemprof::util {

/// CuPy LineProfileHook: divide by 1024 through '', K, M, G, T, P, E (then Z), "%3.2f" + unit +
/// "B": 512 -> "512.00B", 4096 -> "4.00KB", 1572864 -> "1.50MB".
std::string cupy_size(std::int64_t bytes);

/// PyTorch's format_size (OOM message): <= 1024 "N bytes"; <= 1 MiB "%.2f KiB"; <= 1 GiB
/// "%.2f MiB"; else "%.2f GiB" (exactly 1 MiB prints "1024.00 KiB").
std::string torch_size(std::int64_t bytes);

/// torch_size followed by the exact count: "2.00 MiB (2097152 bytes)" (the .txt report).
std::string torch_size_exact(std::int64_t bytes);

/// The same for an unsigned count (a request size): 2^63 bytes and more stay positive, as in
/// PyTorch's format_size of a size_t ("16.00 EiB" is "17179869184.00 GiB").
std::string torch_size_u(std::uint64_t bytes);
std::string torch_size_exact_u(std::uint64_t bytes);

/// IEC units up to TiB, whichever sign: "512 B", "1.00 KiB", "-3.50 GiB" (the CLI's tables).
std::string iec_size(std::int64_t bytes);

/// A size as a user writes it: decimal digits, then no suffix or B (bytes), K/KB/KiB, M/MB/MiB,
/// G/GB/GiB or T/TB/TiB (powers of 1024, any case): "4096", "512KiB", "1536M", "80G". False (and
/// *out unchanged) on anything else, or when the bytes do not fit 64 bits.
bool parse_size(std::string_view text, std::uint64_t* out);

} // namespace gpumemprof::util
