// SPDX-License-Identifier: MIT
// The library's writes into files: never a signal in the program (SIGPIPE for a pipe whose
// reader left, SIGXFSZ past RLIMIT_FSIZE), every short write and error seen.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumemprof::util {

/// Write all `size` bytes to `fd` (EINTR retried). SIGPIPE and SIGXFSZ are blocked on the calling
/// thread for the call; one that this write raised is consumed, never delivered (one the program
/// had pending already stays pending). Returns 0, or the errno of the failure (EPIPE, EFBIG,
/// ENOSPC, ...). Async-signal-safe.
int write_all_quietly(int fd, const void* data, std::size_t size) noexcept;

/// Bytes write_all_quietly has written in this process so far (all files): a report or a trace
/// being written makes it grow, so a waiter can tell a long write that goes on from a stuck one.
/// Async-signal-safe.
std::uint64_t bytes_written_quietly() noexcept;

} // namespace gpumemprof::util
