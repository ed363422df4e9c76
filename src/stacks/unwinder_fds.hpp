// SPDX-License-Identifier: MIT
// libunwind checks memory before reading it through a pipe it keeps open for the life of the
// process (write(pipe, addr, 1) fails on an unreadable address). A program that closes every fd
// and reuses the numbers (a daemon, a sandbox, tests/hostile's fds case) would then have libunwind
// read from, write to and close the program's own files: when its read of the old number fails
// it closes both old numbers and makes a new pipe. guard_unwinder_fds() redirects libunwind's own
// calls of read, write, close and pipe2 (its GOT entries, nothing else in the process) to versions
// that keep the pipe at a high number and never touch a descriptor that is not that very pipe.
#pragma once

namespace gpumemprof::stacks {

/// Once, before libunwind's first use. Returns false when libunwind's module or its relocations
/// could not be found or patched (then it runs unguarded, as before).
bool guard_unwinder_fds() noexcept;

/// For tests: whether `fd` is libunwind's validation pipe as the guard knows it.
bool is_unwinder_pipe(int fd) noexcept;

} // namespace gpumemprof::stacks
