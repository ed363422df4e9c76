// SPDX-License-Identifier: MIT
// Trace tree: interning of stacks into ids (see trace_tree.hpp).
#include "stacks/trace_tree.hpp"

#include <atomic>
#include <cstring>
#include <memory>
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

// ---- per-thread cache of whole stacks -------------------------------------------------------
// A PyTorch step allocates from a few hundred distinct stacks of 30-40 frames, over and over;
// walking the tree costs one hash probe per frame under the lock. Two independent 64-bit hashes
// of the whole stack (plus its length) identify it: a false match needs a 128-bit collision.

struct StackHash {
    std::uint64_t a, b;
};

inline std::uint64_t mix64(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

inline StackHash hash_stack(const std::uintptr_t* ips, int n) noexcept {
    std::uint64_t a = 0x243f6a8885a308d3ull ^ static_cast<std::uint64_t>(n);
    std::uint64_t b = 0x13198a2e03707344ull + static_cast<std::uint64_t>(n);
    for (int i = 0; i < n; ++i) {
        const auto ip = static_cast<std::uint64_t>(ips[i]);
        a = (a ^ ip) * 0x9e3779b97f4a7c15ull;
        a ^= a >> 29;
        b = (b + ip) * 0xc2b2ae3d27d4eb4full;
        b = (b << 31) | (b >> 33);
    }
    return StackHash{mix64(a), mix64(b ^ 0xa0761d6478bd642full)};
}

struct CacheEntry {
    std::uint64_t a, b;
    StackId id; ///< 0: empty
    std::int32_t n;
};

constexpr std::size_t kCacheEntries = 1024; // direct-mapped; 24 KiB per allocating thread

struct ThreadCache {
    std::uint64_t generation = 0; ///< the tree whose ids the entries hold
    CacheEntry entries[kCacheEntries];
};

std::atomic<std::uint64_t> g_next_generation{1};

// A plain pointer (no TLS guard on the hot path) and a holder whose destructor frees the cache
// at thread exit; a thread that allocates during its own exit after that goes uncached.
thread_local ThreadCache* tl_cache = nullptr;
thread_local bool tl_cache_gone = false;

struct ThreadCacheHolder {
    ~ThreadCacheHolder() {
        delete tl_cache;
        tl_cache = nullptr;
        tl_cache_gone = true;
    }
};
thread_local ThreadCacheHolder tl_cache_holder;

ThreadCache* thread_cache(std::uint64_t generation) noexcept {
    ThreadCache* c = tl_cache;
    if (c == nullptr) {
        if (tl_cache_gone)
            return nullptr;
        c = new (std::nothrow) ThreadCache();
        if (c == nullptr)
            return nullptr;
        (void)&tl_cache_holder; // registers the destructor for this thread
        tl_cache = c;
    }
    if (c->generation != generation) {
        std::memset(c->entries, 0, sizeof c->entries);
        c->generation = generation;
    }
    return c;
}

} // namespace

TraceTree::TraceTree() : generation_(g_next_generation.fetch_add(1, std::memory_order_relaxed)) {
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

StackId TraceTree::intern(const std::uintptr_t* ips, int n, bool* cached) noexcept {
    if (cached != nullptr)
        *cached = false;
    if (ips == nullptr || n <= 0)
        return 0;
    ThreadCache* c = thread_cache(generation_);
    if (c == nullptr)
        return intern_locked(ips, n);
    const StackHash h = hash_stack(ips, n);
    CacheEntry& e = c->entries[h.a & (kCacheEntries - 1)];
    if (e.id != 0 && e.a == h.a && e.b == h.b && e.n == n) {
        if (cached != nullptr)
            *cached = true;
        return e.id;
    }
    const StackId id = intern_locked(ips, n);
    if (id != 0)
        e = CacheEntry{h.a, h.b, id, n};
    return id;
}

StackId TraceTree::intern_locked(const std::uintptr_t* ips, int n) noexcept {
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
