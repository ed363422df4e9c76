// SPDX-License-Identifier: MIT
// Which forward line caused a backward-pass allocation. PyTorch's autograd engine evaluates a
// node with it set as the thread's current node (torch::autograd::get_current_node(), exported
// by libtorch_cpu.so); the node keeps the number PyTorch's per-thread sequence counter had when
// its forward op made it, and that thread's id (Node::sequence_nr_, Node::thread_id_; offsets
// in core/torch_abi.hpp). A forward op's own allocations happen after it made its node, when the
// counter (at::sequence_number::peek()) reads one more. So every forward allocation's stack is
// remembered under (thread, counter), and a backward allocation of node (thread, n) is charged to
// the forward stack remembered under (thread, n + 1): exact, or, when that op allocated nothing,
// not known (the site is then labelled with the node's name alone).
#pragma once

#include "core/torch_abi.hpp"
#include "stacks/trace_tree.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpumemprof::core {

class TorchAutograd {
public:
    /// Finds PyTorch's autograd functions in libtorch_cpu.so, in the folder `lib_dir` of
    /// libc10_cuda.so. False when they are not there (the attribution is then off).
    bool init(const std::string& lib_dir, const torch_abi::Layout& layout) noexcept;
    bool ready() const noexcept { return ready_; }

    struct Node {
        bool present = false;
        std::uint64_t seq = 0;
        std::uint64_t thread = 0;
        std::uint32_t name_id = 0; ///< stacks::autograd::node_name_id
        bool accumulate_grad = false;
    };
    /// The node this thread evaluates (backward), or none (forward, optimizer, ...).
    Node current() const noexcept;
    /// Whether this thread evaluates a node now (current().present, without naming the node).
    bool in_backward() const noexcept;
    /// This thread's position in the forward pass: its RecordFunction thread id, and its sequence
    /// counter now.
    std::uint64_t forward_thread() const noexcept;
    std::uint64_t forward_seq() const noexcept;

    /// A forward allocation's stack, under (thread, seq).
    void remember(std::uint64_t thread, std::uint64_t seq, stacks::StackId id) noexcept;
    /// The stack of a backward allocation made while `n` was evaluated: its own frames (`own`),
    /// the node's marker, then the stack of the forward op that made the node.
    stacks::StackId backward_stack(stacks::StackId own, const Node& n) noexcept;
    /// Backward allocations charged to a forward line, and those whose forward op was not seen.
    std::uint64_t matched() const noexcept { return matched_.load(std::memory_order_relaxed); }
    std::uint64_t unmatched() const noexcept { return unmatched_.load(std::memory_order_relaxed); }

    static constexpr int kSlots = 1 << 16;

private:
    std::uint32_t name_of(const void* node) noexcept;
    stacks::StackId forward_of(std::uint64_t thread, std::uint64_t seq) const noexcept;

    bool ready_ = false;
    const torch_abi::Layout* layout_ = nullptr;
    void* get_current_node_ = nullptr;
    std::uint64_t (*peek_)() = nullptr;
    std::uint64_t (*thread_id_)() = nullptr;

    struct Slot {
        std::uint64_t thread = 0, seq = 0;
        stacks::StackId id = 0;
    };
    mutable std::mutex mutex_;
    std::vector<Slot> slots_;                              ///< (thread, seq) -> stack, newest wins a collision
    std::unordered_map<const void*, std::uint32_t> names_; ///< type_info -> name id
    std::uint32_t accumulate_grad_id_ = 0xffffffffu;
    std::atomic<std::uint64_t> matched_{0}, unmatched_{0};
};

/// "N5torch8autograd9generated16NllLossBackward0E" -> "NllLossBackward0" (a type_info name).
std::string last_name_of_type(const char* mangled);

} // namespace gpumemprof::core
