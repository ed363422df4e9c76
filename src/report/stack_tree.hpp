// SPDX-License-Identifier: MIT
// The call stacks of one report as a prefix tree of FrameTable indices rooted at the outermost
// frame (as stacks::TraceTree interns raw addresses): stacks sharing their outer frames share
// nodes, so a million call sites cost a few bytes each rather than a copy of every frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpumemprof::report {

/// Node 0 is the empty stack; every other node is (parent node, frame) and stands for the stack
/// from the root down to it. A stack is named by its innermost node.
class StackTree {
public:
    StackTree();

    /// The node of `parent`'s stack with `frame` added inside it (found, or added).
    std::uint32_t child(std::uint32_t parent, std::uint32_t frame);
    /// The node of the stack `root_first[0..n)`.
    std::uint32_t add(const std::uint32_t* root_first, std::size_t n);
    std::uint32_t add(const std::vector<std::uint32_t>& root_first) {
        return add(root_first.data(), root_first.size());
    }

    std::uint32_t parent(std::uint32_t node) const { return at(node).parent; }
    std::uint32_t frame(std::uint32_t node) const { return at(node).frame; }
    std::uint32_t depth(std::uint32_t node) const { return at(node).depth; } ///< frames in the stack
    std::size_t size() const { return size_; }

    /// The frames of `node`'s stack, root first, into *out (replacing its content).
    void frames(std::uint32_t node, std::vector<std::uint32_t>* out) const;

    /// Frees the lookup index (rebuilt by the next child()): the tree is read from now on.
    void seal();
    /// The children of `node` (in the order they were made), as [begin, end) into
    /// children_data(). The lists are made at the first call after the tree last grew.
    std::pair<std::uint32_t, std::uint32_t> children(std::uint32_t node) const {
        list_children();
        return {first_child_[node], first_child_[node + 1]};
    }
    const std::vector<std::uint32_t>& children_data() const {
        list_children();
        return child_;
    }

private:
    struct Node {
        std::uint32_t parent;
        std::uint32_t frame;
        std::uint32_t depth;
    };
    // Nodes in blocks of a fixed size: growing never copies them (no moment with two copies).
    static constexpr unsigned kBlockBits = 16;
    const Node& at(std::uint32_t node) const { return blocks_[node >> kBlockBits][node & ((1u << kBlockBits) - 1)]; }
    std::size_t slot_of(std::uint32_t parent, std::uint32_t frame) const;
    void rebuild(std::size_t slots);

    std::vector<std::vector<Node>> blocks_;
    std::size_t size_ = 0;
    std::vector<std::uint32_t> index_; ///< open addressing (linear probing) of node ids; 0: empty
    void list_children() const;
    mutable std::vector<std::uint32_t> first_child_, child_; ///< children in compressed rows (or none yet)
};

} // namespace gpumemprof::report
