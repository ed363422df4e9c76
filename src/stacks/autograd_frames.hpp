// SPDX-License-Identifier: MIT
// A backward-pass allocation's stack carries, between its own (autograd engine) frames and the
// forward pass's stack that made the autograd node, one marker word naming the node: the site
// then reads "train.py:44 -> backward of NllLossBackward0 -> at::native::...". The word cannot be
// a code address (bit 47 set, bits 48-63 clear: above user space on x86-64 and not a Python frame).
#pragma once

#include <cstdint>
#include <string>

namespace gpumemprof::stacks::autograd {

inline constexpr std::uintptr_t kBackwardTag = std::uintptr_t{1} << 47;
/// The forward pass's stack of the node is not known (its forward op allocated nothing we saw,
/// or the node has no forward op, as AccumulateGrad): the word ends the stack.
inline constexpr std::uintptr_t kUnmatched = std::uintptr_t{1} << 46;

inline constexpr bool is_backward_frame(std::uintptr_t w) noexcept {
    return (w >> 47) == 1;
}

/// The marker word for node type `name_id` (node_name_id).
inline constexpr std::uintptr_t backward_frame(std::uint32_t name_id, bool matched) noexcept {
    return kBackwardTag | (matched ? 0 : kUnmatched) | name_id;
}

/// The id of an autograd node's type name ("NllLossBackward0"), interned process-wide; the name
/// is copied on first sight. Thread-safe; allocates only for a new name.
std::uint32_t node_name_id(const char* name) noexcept;

/// The node type of a marker word, and whether its forward stack follows.
std::string node_name(std::uintptr_t word);
bool matched(std::uintptr_t word) noexcept;

/// fork: the table's lock is taken around fork.
void lock_for_fork() noexcept;
void unlock_after_fork() noexcept;

} // namespace gpumemprof::stacks::autograd
