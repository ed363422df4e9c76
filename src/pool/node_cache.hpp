// SPDX-License-Identifier: MIT
// Node recycling for the pool's block sets: a free list behind the sets' allocator, so that an
// insert after a call began changing the pool never reaches the heap (a host out-of-memory then
// leaves the pool unchanged). Under the pool's lock only.
#pragma once

#include <cstddef>
#include <new>

namespace gpumemprof::pool::detail {

/// The block sets' nodes, recycled through a free list: an erase gives its node back, an insert
/// takes one. fill() fills it before a call changes anything, so that no insert made after that
/// reaches the heap. Every set of a pool holds Block* nodes, so they all have one node size;
/// other sizes go to the heap.
class NodeCache {
public:
    NodeCache() = default;
    NodeCache(const NodeCache&) = delete;
    NodeCache& operator=(const NodeCache&) = delete;
    ~NodeCache() {
        while (head_ != nullptr) {
            Link* next = head_->next;
            ::operator delete(head_);
            head_ = next;
        }
    }

    std::size_t count() const { return count_; }

    void* take(std::size_t bytes) {
        if (bytes == node_size_ && head_ != nullptr) {
            Link* l = head_;
            head_ = l->next;
            --count_;
            return l;
        }
        if (node_size_ == 0 && bytes >= sizeof(Link))
            node_size_ = bytes; // the first set node ever allocated fixes the size kept here
        return ::operator new(bytes);
    }

    void give(void* p, std::size_t bytes) noexcept {
        if (bytes != node_size_) {
            ::operator delete(p);
            return;
        }
        head_ = ::new (p) Link{head_};
        ++count_;
    }

    /// Until count() >= n (may throw bad_alloc; the nodes obtained so far stay). The node size
    /// must be known: one node was taken and given back before (BlockStore's constructor).
    void fill(std::size_t n) {
        while (count_ < n)
            give(::operator new(node_size_), node_size_);
    }

private:
    struct Link {
        Link* next;
    };
    Link* head_ = nullptr;
    std::size_t count_ = 0;
    std::size_t node_size_ = 0;
};

/// The sets' allocator: nodes from and back to a NodeCache.
template <typename T> struct NodeAlloc {
    using value_type = T;
    NodeCache* cache;
    explicit NodeAlloc(NodeCache* c) noexcept : cache(c) {}
    template <typename U> NodeAlloc(const NodeAlloc<U>& o) noexcept : cache(o.cache) {}
    T* allocate(std::size_t n) { return static_cast<T*>(cache->take(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { cache->give(p, n * sizeof(T)); }
    template <typename U> bool operator==(const NodeAlloc<U>& o) const noexcept { return cache == o.cache; }
};

} // namespace gpumemprof::pool::detail
