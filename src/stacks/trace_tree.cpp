// SPDX-License-Identifier: MIT
// Trace tree: interning of stacks into ids (see trace_tree.hpp).
#include "stacks/trace_tree.hpp"

#include <algorithm>
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

// ---- the stack cache: whole stacks to ids, shared by all threads ----------------------------
// A training step allocates from a few hundred distinct stacks, over and over; walking the tree
// costs one probe per frame under the lock. Two 64-bit hashes of the whole stack (with its length
// and the tree's generation) identify it: a false match needs a 128-bit collision. One table for
// the process (1 MiB, pages resident as they are used), not one per thread. Entries are written
// under a sequence number (odd while being written): a reader that sees it change, or odd, misses.

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

/// Four independent lanes (one word in four each), so that the multiplications of consecutive
/// words overlap; 256 bits of state folded into two 64-bit halves.
inline StackHash hash_stack(const std::uintptr_t* ips, int n, std::uint64_t seed) noexcept {
    std::uint64_t h0 = 0x243f6a8885a308d3ull ^ seed, h1 = 0x13198a2e03707344ull + static_cast<std::uint64_t>(n);
    std::uint64_t h2 = 0xa4093822299f31d0ull ^ (seed << 17), h3 = 0x082efa98ec4e6c89ull;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        h0 = (h0 ^ ips[i]) * 0x9e3779b97f4a7c15ull;
        h1 = (h1 ^ ips[i + 1]) * 0xc2b2ae3d27d4eb4full;
        h2 = (h2 ^ ips[i + 2]) * 0x165667b19e3779f9ull;
        h3 = (h3 ^ ips[i + 3]) * 0xd6e8feb86659fd93ull;
        h0 ^= h0 >> 32;
        h1 ^= h1 >> 29;
        h2 ^= h2 >> 31;
        h3 ^= h3 >> 27;
    }
    for (; i < n; ++i) {
        h0 = (h0 ^ ips[i]) * 0x9e3779b97f4a7c15ull;
        h0 ^= h0 >> 32;
        h1 += h0;
    }
    // Each half from all four lanes: `a` picks the cache entry, so a lane left out of it would put
    // stacks that differ only in that lane's words (every fourth frame) in one entry, each pushing
    // the other out for ever.
    const std::uint64_t a =
        mix64(h0 ^ ((h1 << 21) | (h1 >> 43)) ^ mix64(h2 + static_cast<std::uint64_t>(n)) ^ ((h3 << 42) | (h3 >> 22)));
    const std::uint64_t b = mix64(h3 ^ ((h2 << 39) | (h2 >> 25)) ^ mix64(h1 ^ 0xa0761d6478bd642full) ^ (h0 >> 7));
    return StackHash{a, b};
}

struct CacheEntry {
    std::atomic<std::uint64_t> seq{0}; ///< even: stable; odd: being written
    std::atomic<std::uint64_t> a{0}, b{0};
    std::atomic<std::uint64_t> id_n{0}; ///< id | n << 32; id 0: empty
};

constexpr std::size_t kCacheEntries = std::size_t{1} << 15; // 32 B each: 1 MiB

std::atomic<std::uint64_t> g_next_generation{1};

CacheEntry* stack_cache() noexcept {
    // Leaked on purpose (hooks run during static destruction). calloc-like zero pages: only the
    // entries a program uses become resident.
    static CacheEntry* c = new (std::nothrow) CacheEntry[kCacheEntries];
    return c;
}

bool cache_find(CacheEntry& e, const StackHash& h, int n, StackId* id) noexcept {
    const std::uint64_t s1 = e.seq.load(std::memory_order_acquire);
    if ((s1 & 1) != 0)
        return false;
    const std::uint64_t a = e.a.load(std::memory_order_relaxed);
    const std::uint64_t b = e.b.load(std::memory_order_relaxed);
    const std::uint64_t idn = e.id_n.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != s1)
        return false;
    if (a != h.a || b != h.b || (idn >> 32) != static_cast<std::uint64_t>(n) || (idn & 0xffffffffu) == 0)
        return false;
    *id = static_cast<StackId>(idn & 0xffffffffu);
    return true;
}

void cache_store(CacheEntry& e, const StackHash& h, int n, StackId id) noexcept {
    std::uint64_t s = e.seq.load(std::memory_order_relaxed);
    if ((s & 1) != 0 || !e.seq.compare_exchange_strong(s, s + 1, std::memory_order_acquire))
        return; // another thread is writing it: leave it
    std::atomic_thread_fence(std::memory_order_release);
    e.a.store(h.a, std::memory_order_relaxed);
    e.b.store(h.b, std::memory_order_relaxed);
    e.id_n.store(static_cast<std::uint64_t>(id) | (static_cast<std::uint64_t>(n) << 32), std::memory_order_relaxed);
    e.seq.store(s + 2, std::memory_order_release);
}

} // namespace

TraceTree::TraceTree() : generation_(g_next_generation.fetch_add(1, std::memory_order_relaxed)) {
    nodes_.reserve(kInitialSlots / 2);
    nodes_.push_back(Node{0, 0, 0});
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
    const StackId first = nodes_[parent].first_child;
    if (first != 0 && nodes_[first].ip == ip)
        return first;
    std::size_t i = 0;
    if (first != 0) {
        i = hash_edge(parent, ip) & mask_;
        for (;;) {
            Slot& s = slots_[i];
            if (s.child == 0)
                break;
            if (s.ip == ip && s.parent == parent)
                return s.child;
            i = (i + 1) & mask_;
        }
    }
    if (nodes_.size() >= 0xffffffffu)
        return 0; // id space exhausted: the caller records "no stack"
    const auto id = static_cast<StackId>(nodes_.size());
    nodes_.push_back(Node{ip, parent, 0});
    if (first == 0) {
        nodes_[parent].first_child = id;
        return id;
    }
    slots_[i] = Slot{ip, parent, id};
    if (++hashed_ * 2 > slots_.size())
        grow();
    return id;
}

StackId TraceTree::intern(const std::uintptr_t* ips, int n, bool* cached) noexcept {
    return intern(ips, n, cached, Previous{});
}

StackId TraceTree::intern(const std::uintptr_t* ips, int n, bool* cached, const Previous& previous) noexcept {
    if (cached != nullptr)
        *cached = false;
    if (ips == nullptr || n <= 0)
        return 0;
    const Previous* hint = previous.id != 0 && previous.ips != nullptr && previous.n > 0 ? &previous : nullptr;
    CacheEntry* cache = stack_cache();
    if (cache == nullptr)
        return intern_locked(ips, n, hint);
    const StackHash h = hash_stack(ips, n, generation_);
    CacheEntry& e = cache[h.a & (kCacheEntries - 1)];
    StackId id = 0;
    if (cache_find(e, h, n, &id)) {
        if (cached != nullptr)
            *cached = true;
        return id;
    }
    id = intern_locked(ips, n, hint);
    if (id != 0)
        cache_store(e, h, n, id);
    return id;
}

StackId TraceTree::intern_locked(const std::uintptr_t* ips, int n, const Previous* previous) noexcept {
    // The outer frames this stack shares with the previous one (compared before the lock).
    int common = 0;
    if (previous != nullptr) {
        const int m = std::min(n, previous->n);
        while (common < m && ips[n - 1 - common] == previous->ips[previous->n - 1 - common])
            ++common;
        if (common == n && n == previous->n)
            return previous->id;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    try {
        StackId node = 0;
        if (common > 0) {
            // The node of the shared part: previous->id's ancestor (previous->n - common) levels up.
            node = previous->id;
            if (node >= nodes_.size())
                return 0;
            for (int up = previous->n - common; up > 0 && node != 0; --up)
                node = nodes_[node].parent;
            if (node == 0)
                return 0;
        }
        // Walk from the outermost frame so that stacks with a common outer part share nodes.
        for (int i = n - 1 - common; i >= 0; --i) {
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

} // namespace gpumemprof::stacks
