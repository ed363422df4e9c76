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
/// issue #287). No symbolisation; a walk with the process-wide frame rules (frame_rules.hpp),
/// reading nothing but the thread's own stack above its current frame. Returns the number written
/// (0 on a thread whose stack bounds are unknown).
int capture_backtrace(std::uintptr_t* ips, int max_frames, int skip) noexcept;

/// The calling thread's stack as pthread reports it, [lo, hi), found once per thread.
struct StackBounds {
    std::uintptr_t lo = 0, hi = 0;
    bool known = false;
};
const StackBounds& thread_stack_bounds() noexcept;

} // namespace gpumemprof::stacks
