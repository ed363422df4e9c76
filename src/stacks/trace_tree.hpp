// SPDX-License-Identifier: MIT
// Interning of whole call stacks into one integer: a parent-pointer prefix tree of code
// addresses rooted at the outermost frame (heaptrack's TraceTree), so equal stacks get equal ids,
// stacks sharing their outer frames share nodes, and every id's frames can be read back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpumemprof::stacks {

/// One interned stack; 0 means "no stack" (capture off or failed).
using StackId = std::uint32_t;

class TraceTree {
public:
    TraceTree();

    /// Interns `ips[0..n)` (innermost first, as capture_backtrace writes them) and returns the id
    /// of its innermost node. The same sequence always yields the same id. n == 0 gives 0.
    /// Thread-safe; allocates only when a table has to grow (amortised, never per frame).
    /// A stack interned recently (by any thread) is answered from a shared cache keyed by a
    /// 128-bit hash of the whole stack, without the lock or the per-frame walk; `*cached` (if
    /// given) says whether that happened.
    StackId intern(const std::uintptr_t* ips, int n, bool* cached = nullptr) noexcept;

    /// The same, for a caller that knows a stack it interned before (the capturing thread's
    /// previous one): when the cache misses, the outer frames the two have in common are not
    /// looked up again from the root; the walk starts at their node, reached from `previous_id`
    /// through parent links. `previous` must be the frames `previous_id` was interned from.
    struct Previous {
        const std::uintptr_t* ips = nullptr;
        int n = 0;
        StackId id = 0;
    };
    StackId intern(const std::uintptr_t* ips, int n, bool* cached, const Previous& previous) noexcept;

    /// The frames of `id`, innermost first (the inverse of intern). Empty for 0 or unknown ids.
    std::vector<std::uintptr_t> frames(StackId id) const;

    /// Number of nodes (distinct stack suffixes seen), excluding the root.
    std::size_t size() const;

    /// Tells this tree from every other one in the process (ids of one tree mean nothing in another).
    std::uint64_t generation() const noexcept { return generation_; }

    std::mutex& mutex() { return mutex_; }

private:
    struct Node {
        std::uintptr_t ip;
        StackId parent;
        StackId first_child; ///< 0: none. Later children are in slots_.
    };
    // A node's first child is found through the node itself (most nodes of a stack tree have one
    // child: a new stack adds a chain of nodes, each the first child of the one before, written
    // one after the other). Other children: an open-addressing table (linear probing) from
    // (parent, ip) to the child's id; slot value 0 is empty because the root (id 0) is never
    // anybody's child.
    struct Slot {
        std::uintptr_t ip;
        StackId parent;
        StackId child;
    };

    StackId find_or_add(StackId parent, std::uintptr_t ip);
    StackId intern_locked(const std::uintptr_t* ips, int n, const Previous* previous) noexcept;
    void grow();

    /// Tells this tree's entries in the per-thread caches from another tree's (tests make many).
    const std::uint64_t generation_;
    mutable std::mutex mutex_;
    std::vector<Node> nodes_; ///< index = id; nodes_[0] is the root
    std::vector<Slot> slots_; ///< power-of-two size, load factor <= 1/2
    std::size_t mask_ = 0;
    std::size_t hashed_ = 0; ///< children in slots_
};

} // namespace gpumemprof::stacks
