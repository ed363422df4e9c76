// SPDX-License-Identifier: MIT
// PYTORCH_CUDA_ALLOC_CONF-syntax settings of the pool, and their parser.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace gpumemprof::pool {

inline constexpr std::size_t kMiB = 1024 * 1024;
inline constexpr std::size_t kRoundUpPowerOfTwoIntervals = 16;

struct AllocConf {
    /// Blocks >= this are never split ("oversize"). SIZE_MAX = unlimited (PyTorch default).
    std::size_t max_split_size = std::numeric_limits<std::size_t>::max();
    /// An oversize request may take a cached block at most this much larger.
    std::size_t max_non_split_rounding_size = 20 * kMiB;
    /// Divisions per power-of-two interval; entry i covers [2^(20+i), 2^(21+i)), entry 0 also
    /// everything below 2 MiB, entry 15 everything above. 0 or 1 = plain 512-byte rounding.
    std::array<std::size_t, kRoundUpPowerOfTwoIntervals> roundup_power2_divisions{};
    /// 0 = off; otherwise in (0, 1): fraction of the allowed memory above which cached blocks
    /// are garbage-collected (only when per_process_memory_fraction is set, as in PyTorch).
    double garbage_collection_threshold = 0.0;
    /// 0 = unlimited; otherwise in (0, 1]: the pool refuses to reserve more than this fraction
    /// of total device memory.
    double per_process_memory_fraction = 0.0;
    /// PyTorch's expandable segments: per stream and pool one reserved address range whose
    /// mapped part grows and shrinks by pages (2 MiB small pool, 20 MiB large pool).
    bool expandable_segments = false;

    /// The text this was parsed from (for reports), empty for defaults.
    std::string source;

    bool operator==(const AllocConf&) const = default;
};

/// Parse `text` (e.g. "max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4]").
/// Never throws. Every problem appends one human-readable warning that names the offending key
/// and value to `warnings`; that key keeps its default and parsing continues with the next key.
/// Keys accepted but without effect here (backend, release_lock_on_cudamalloc,
/// pinned_*, graph_capture_record_stream_reuse) produce a warning saying they are ignored, unless
/// their value is the default.
AllocConf parse_alloc_conf(std::string_view text, std::vector<std::string>* warnings);

/// Render a config back into PYTORCH_CUDA_ALLOC_CONF syntax (only non-default keys).
std::string format_alloc_conf(const AllocConf& conf);

} // namespace gpumemprof::pool
