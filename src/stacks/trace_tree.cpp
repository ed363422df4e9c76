// SPDX-License-Identifier: MIT
// Trace tree: interning of stacks into ids (see trace_tree.hpp).
#include "stacks/trace_tree.hpp"

#include <new>

namespace gpumemprof::stacks {

namespace {

inline std::size_t hash_edge(StackId parent, std::uintptr_t ip) noexcept {
    // Code addresses differ mostly in their low bits; mix both words (splitmix64 finaliser).
    std::uint64_t x = static_cast<std::uint64_t>(ip) ^ (static_cast<std::uint64_t>(parent) << 40) ^
                      (static_cast<std::uint64_t>(parent) * 0x9e3779b97f4a7c15ull);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return static_cast<std::size_t>(x);
}

constexpr std::size_t kInitialSlots = 1u << 12;

} // namespace

TraceTree::TraceTree() {
    nodes_.reserve(kInitialSlots / 2);
    nodes_.push_back(Node{0, 0});
    slots_.assign(kInitialSlots, Slot{0, 0, 0});
    mask_ = kInitialSlots - 1;
}

void TraceTree::grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{0, 0, 0});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
        if (s.child == 0)
            continue;
        std::size_t i = hash_edge(s.parent, s.ip) & mask_;
        while (slots_[i].child != 0)
            i = (i + 1) & mask_;
        slots_[i] = s;
    }
}

StackId TraceTree::find_or_add(StackId parent, std::uintptr_t ip) {
    std::size_t i = hash_edge(parent, ip) & mask_;
    for (;;) {
        Slot& s = slots_[i];
        if (s.child == 0)
            break;
        if (s.ip == ip && s.parent == parent)
            return s.child;
        i = (i + 1) & mask_;
    }
    if (nodes_.size() >= 0xffffffffu)
        return 0; // id space exhausted: the caller records "no stack"
    const auto id = static_cast<StackId>(nodes_.size());
    nodes_.push_back(Node{ip, parent});
    slots_[i] = Slot{ip, parent, id};
    if (nodes_.size() * 2 > slots_.size())
        grow();
    return id;
}

StackId TraceTree::intern(const std::uintptr_t* ips, int n) noexcept {
    if (ips == nullptr || n <= 0)
        return 0;
    std::lock_guard<std::mutex> lock(mutex_);
    try {
        StackId node = 0;
        // Walk from the outermost frame so that stacks with a common outer part share nodes.
        for (int i = n - 1; i >= 0; --i) {
            node = find_or_add(node, ips[i]);
            if (node == 0)
                return 0;
        }
        return node;
    } catch (...) {
        return 0; // out of memory while growing: this allocation simply has no stack
    }
}

std::vector<std::uintptr_t> TraceTree::frames(StackId id) const {
    std::vector<std::uintptr_t> out;
    std::lock_guard<std::mutex> lock(mutex_);
    if (id == 0 || id >= nodes_.size())
        return out;
    while (id != 0) {
        out.push_back(nodes_[id].ip);
        id = nodes_[id].parent;
    }
    return out;
}

std::size_t TraceTree::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return nodes_.size() - 1;
}

void TraceTree::reinit_lock_after_fork() noexcept {
    // Only the forking thread exists in the child; a lock held by another thread at fork time
    // would never be released. Re-creating the mutex is the usual remedy (glibc does the same
    // for its own locks); the tree may be mid-update only if that other thread was inside
    // intern(), which the core prevents by taking the lock in its prepare handler.
    new (&mutex_) std::mutex();
}

} // namespace gpumemprof::stacks
