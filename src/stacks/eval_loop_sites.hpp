// SPDX-License-Identifier: MIT
// Where the interpreter's eval loop runs, as code addresses learnt while the program runs: the
// report puts each call of the eval loop's Python frames in that call's native frame. Its name
// (_PyEval_EvalFrameDefault) finds it only where the interpreter keeps its symbols; a stripped,
// profile-optimised build (Debian's and Ubuntu's python3) runs most of the loop in an unnamed
// split-off part. What is learnt instead: the native frame whose stack frame holds an entry shim
// (python::shim_addresses) is the eval loop's, and its code address one of the loop's call sites.
#pragma once

#include <cstdint>

namespace gpumemprof::stacks::eval_loop {

/// Learns the eval loop's code addresses among ips[0..n), the calling thread's latest native walk
/// (capture_backtrace with `skip`, its WalkInfo::serial), from where its Python frame chain's
/// entry shims are; nothing when another walk came since. A few hundred nanoseconds and up; the
/// recorder calls it for stacks its cache did not know. Never allocates.
void learn(const std::uintptr_t* ips, int n, int skip, std::uint64_t serial) noexcept;

/// Whether `ip` (a code address of a stack) was learnt as the eval loop's.
bool is_site(std::uintptr_t ip) noexcept;

} // namespace gpumemprof::stacks::eval_loop
