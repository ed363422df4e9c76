// SPDX-License-Identifier: MIT
// Unwind the calling thread into a caller-provided array of instruction pointers (hot path).
#pragma once

#include <cstdint>

namespace gpumemprof::stacks {

/// Deepest stack we ever keep; callers size their arrays with it.
inline constexpr int kMaxFrames = 256;

/// Writes at most `max_frames` code addresses of the calling thread into `ips`, innermost first,
/// starting `skip` frames above the caller of capture_backtrace (skip = 0: the first entry is
/// inside the function that called capture_backtrace). Each address is the return address minus
/// one, so it points into the call instruction and symbolises to the calling line (libunwind
/// issue #287). No locks, no symbolisation; the raw frames go to a per-thread heap buffer made at
/// the thread's first call (its own stack holds only libunwind's cursor). Returns the number written.
int capture_backtrace(std::uintptr_t* ips, int max_frames, int skip) noexcept;

} // namespace gpumemprof::stacks
