// SPDX-License-Identifier: MIT
// Unwind the calling thread into a caller-provided array of instruction pointers (hot path).
#pragma once

#include <cstdint>
#include <vector>

namespace gpumemprof::stacks {

/// Deepest stack we ever keep; callers size their arrays with it.
inline constexpr int kMaxFrames = 256;

/// What one walk took from the thread's previous walk (its shadow).
struct WalkInfo {
    int from_shadow = 0; ///< frames of the result copied from the previous walk, not walked (0: none)
    /// Per thread, the same from one walk to the next only when the result is certainly the same
    /// (the same frames, walked with the same max_frames and skip): the caller may then keep
    /// what it made of the result without comparing it.
    std::uint64_t serial = 0;
};

/// Writes at most `max_frames` code addresses of the calling thread into `ips`, innermost first,
/// starting `skip` frames above the caller of capture_backtrace (skip = 0: the first entry is
/// inside the function that called capture_backtrace). Each address is the return address minus
/// one, so it points into the call instruction and symbolises to the calling line (libunwind
/// issue #287). No symbolisation; a walk with the process-wide frame rules (frame_rules.hpp),
/// reading nothing but the thread's own stack above its current frame. Returns the number written
/// (0 on a thread whose stack bounds are unknown).
/// The walk stops at the first frame where it meets the thread's previous walk in the same state
/// with every stack word that walk read from there outward unchanged, and copies the rest from it
/// (docs/design.md, Stacks: why that is the same result). `info`, when given, says how much.
int capture_backtrace(std::uintptr_t* ips, int max_frames, int skip, WalkInfo* info = nullptr) noexcept;

/// The stack pointer of each frame of the calling thread's latest capture_backtrace result, in its
/// order: sps[i] is where the frame of the function ips[i] is in begins, and it ends where the
/// next one begins (sps grow outward). Call it with that walk's `skip` and WalkInfo::serial.
/// Returns how many, at most `max`; 0 when the walk was not remembered entire (a signal
/// handler's walk inside another, a libunwind fallback, a walk the shadow had no room for) or
/// another walk came since (a signal handler's, between the walk and this call).
int latest_walk_sps(std::uintptr_t* sps, int max, int skip, std::uint64_t serial) noexcept;
/// For tests: the calling thread's shadow of its previous walk, as bytes, and another thread's
/// given to the calling one (as a new thread on a dead one's stack, or a fork child, would have
/// it). Empty / false when the thread has none.
std::vector<unsigned char> save_walk_shadow_for_tests();
bool load_walk_shadow_for_tests(const std::vector<unsigned char>& bytes);

/// The calling thread's stack as pthread reports it, [lo, hi), found once per thread.
struct StackBounds {
    std::uintptr_t lo = 0, hi = 0;
    bool known = false;
};
const StackBounds& thread_stack_bounds() noexcept;

/// Stack a capture may need below the caller's frame: libunwind's cursor and context, its
/// DWARF state while it reads .eh_frame, the Python walk and the interning. Below
/// this much room, or off the thread's own stack, the allocation is kept without a stack.
inline constexpr std::uintptr_t kUnwindStackRoom = 32 * 1024;
/// True when the stack pointer `sp` has room for an unwind: it lies on the thread's own stack
/// (not a makecontext coroutine, not a sigaltstack) with kUnwindStackRoom left below it.
inline bool room_to_unwind(std::uintptr_t sp) noexcept {
    const StackBounds& t = thread_stack_bounds();
    if (!t.known)
        return true; // capture_backtrace itself then returns no frames
    return sp > t.lo && sp <= t.hi && sp - t.lo >= kUnwindStackRoom;
}

} // namespace gpumemprof::stacks
