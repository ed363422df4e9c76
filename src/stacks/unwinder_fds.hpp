// SPDX-License-Identifier: MIT
// libunwind checks memory before reading it through a pipe it makes at its first call and keeps
// for the life of the process (write(pipe, addr, 1) fails on an unreadable address). A program
// that closes every fd and reuses the numbers (a daemon, a sandbox, tests/hostile's fds case)
// would then have libunwind read from, write to and close the program's own files. The library
// never uses that check (frame_rules reads through an address space of its own that checks every
// address first), so guard_unwinder_fds() redirects libunwind's own calls of pipe2 and pipe (its
// GOT entries, nothing else in the process) to a refusal: libunwind holds no descriptor at all.
#pragma once

namespace gpumemprof::stacks {

/// Once, before libunwind's first use. Returns false when libunwind's module or its relocations
/// could not be found or patched (then it makes its pipe as usual).
bool guard_unwinder_fds() noexcept;

/// For tests: how many times libunwind asked for its pipe and was refused.
int unwinder_pipes_refused() noexcept;

} // namespace gpumemprof::stacks
