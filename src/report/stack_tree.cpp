// SPDX-License-Identifier: MIT
#include "report/stack_tree.hpp"

#include <algorithm>
#include <utility>

namespace gpumemprof::report {
namespace {

std::uint64_t mix(std::uint32_t parent, std::uint32_t frame) {
    std::uint64_t h = (static_cast<std::uint64_t>(parent) << 32 | frame) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

} // namespace

StackTree::StackTree() {
    blocks_.emplace_back();
    blocks_.back().push_back({0, 0, 0});
    size_ = 1;
}

std::size_t StackTree::slot_of(std::uint32_t parent, std::uint32_t frame) const {
    const std::size_t mask = index_.size() - 1;
    std::size_t i = static_cast<std::size_t>(mix(parent, frame)) & mask;
    while (index_[i] != 0) {
        const Node& n = at(index_[i]);
        if (n.parent == parent && n.frame == frame)
            return i;
        i = (i + 1) & mask;
    }
    return i;
}

void StackTree::rebuild(std::size_t slots) {
    std::vector<std::uint32_t>().swap(index_); // the old index goes before the new one is made
    index_.assign(slots, 0);
    for (std::uint32_t id = 1; id < size_; ++id)
        index_[slot_of(at(id).parent, at(id).frame)] = id;
}

std::uint32_t StackTree::child(std::uint32_t parent, std::uint32_t frame) {
    if (!first_child_.empty()) { // growing again after seal(): the child lists go stale
        std::vector<std::uint32_t>().swap(first_child_);
        std::vector<std::uint32_t>().swap(child_);
    }
    if ((size_ + 1) * 10 > index_.size() * 7) { // load factor <= 0.7: twice the slots past it
        std::size_t slots = std::max<std::size_t>(64, index_.size() * 2);
        while (slots * 7 < (size_ + 1) * 10)
            slots *= 2;
        rebuild(slots);
    }
    const std::size_t i = slot_of(parent, frame);
    if (index_[i] != 0)
        return index_[i];
    const auto id = static_cast<std::uint32_t>(size_);
    if (blocks_.back().size() == std::size_t{1} << kBlockBits) // a full block: the next one
        blocks_.emplace_back();
    blocks_.back().push_back({parent, frame, at(parent).depth + 1});
    ++size_;
    index_[i] = id;
    return id;
}

std::uint32_t StackTree::add(const std::uint32_t* root_first, std::size_t n) {
    std::uint32_t node = 0;
    for (std::size_t i = 0; i < n; ++i)
        node = child(node, root_first[i]);
    return node;
}

void StackTree::frames(std::uint32_t node, std::vector<std::uint32_t>* out) const {
    out->resize(at(node).depth);
    for (std::size_t i = out->size(); i > 0; --i, node = at(node).parent)
        (*out)[i - 1] = at(node).frame;
}

void StackTree::seal() {
    std::vector<std::uint32_t>().swap(index_);
}

void StackTree::list_children() const {
    if (!first_child_.empty())
        return;
    const std::size_t n = size_;
    // Made aside and moved in whole: a bad_alloc on the way leaves no half-made lists, which a
    // later call (the next report of the same dump) would take for made ones.
    std::vector<std::uint32_t> first(n + 1, 0);
    std::vector<std::uint32_t> child(n > 0 ? n - 1 : 0);
    for (std::uint32_t i = 1; i < n; ++i)
        ++first[at(i).parent + 1];
    for (std::size_t i = 0; i < n; ++i)
        first[i + 1] += first[i];
    for (std::uint32_t i = 1; i < n; ++i) // first[p] as p's cursor: it ends at p + 1's start
        child[first[at(i).parent]++] = i;
    for (std::size_t i = n; i > 0; --i)
        first[i] = first[i - 1];
    first[0] = 0;
    child_ = std::move(child);
    first_child_ = std::move(first);
}

} // namespace gpumemprof::report
