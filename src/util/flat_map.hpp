// SPDX-License-Identifier: MIT
// The one open-addressing hash map of the library, from 64-bit keys to trivially copyable values,
// for the per-event tables (the pool's address -> block, the recorder's pointer -> live block and
// stack id -> site, the model's pointer map): one probe sequence in one array, no allocation per
// insert (std::unordered_map allocates a node per element).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpumemprof::util {

/// Linear probing with backward-shift deletion (no tombstones). Key ~0 is reserved as "empty".
/// Not thread-safe: the owner locks.
template <typename Value> class FlatMap {
public:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

    FlatMap() { rehash(kInitial); }

    /// Empties the map, keeping its capacity.
    void clear() {
        std::fill(slots_.begin(), slots_.end(), Slot{kEmpty, Value{}});
        size_ = 0;
    }
    std::size_t size() const { return size_; }

    Value* find(std::uint64_t key) { return const_cast<Value*>(std::as_const(*this).find(key)); }
    const Value* find(std::uint64_t key) const {
        std::size_t i = index(key);
        for (;;) {
            const Slot& s = slots_[i];
            if (s.key == key)
                return &s.value;
            if (s.key == kEmpty)
                return nullptr;
            i = (i + 1) & mask_;
        }
    }

    /// The value of `key`, or `fallback` when absent.
    Value value_or(std::uint64_t key, Value fallback) const {
        const Value* v = find(key);
        return v != nullptr ? *v : fallback;
    }

    /// Makes room for one more entry (may allocate); the next put() then never allocates, so
    /// that a caller can fail before it changes anything else.
    void reserve_one() {
        if ((size_ + 1) * 2 > slots_.size())
            rehash(slots_.size() * 2);
    }

    /// Inserts (or overwrites) and returns the stored value. May allocate when the table grows.
    Value& put(std::uint64_t key, const Value& value) {
        reserve_one();
        std::size_t i = index(key);
        for (;;) {
            Slot& s = slots_[i];
            if (s.key == key) {
                s.value = value;
                return s.value;
            }
            if (s.key == kEmpty) {
                s.key = key;
                s.value = value;
                ++size_;
                return s.value;
            }
            i = (i + 1) & mask_;
        }
    }

    /// Removes `key`; copies its value to *out (when not null). Returns false when absent.
    bool take(std::uint64_t key, Value* out = nullptr) {
        std::size_t i = index(key);
        for (;;) {
            Slot& s = slots_[i];
            if (s.key == kEmpty)
                return false;
            if (s.key == key)
                break;
            i = (i + 1) & mask_;
        }
        if (out != nullptr)
            *out = slots_[i].value;
        // Backward shift: move later members of the probe run into the hole when their home
        // slot does not lie cyclically in (hole, j].
        std::size_t hole = i;
        std::size_t j = i;
        for (;;) {
            j = (j + 1) & mask_;
            if (slots_[j].key == kEmpty)
                break;
            const std::size_t home = index(slots_[j].key);
            const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
            if (!stays) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole].key = kEmpty;
        --size_;
        return true;
    }

    template <typename F> void for_each(F&& f) const {
        for (const Slot& s : slots_)
            if (s.key != kEmpty)
                f(s.key, s.value);
    }

private:
    struct Slot {
        std::uint64_t key;
        Value value;
    };
    static constexpr std::size_t kInitial = 64;

    /// Fibonacci hashing: the top bits of key x 2^64/phi, so that aligned addresses (low bits
    /// zero) still spread over the table.
    std::size_t index(std::uint64_t key) const {
        return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void rehash(std::size_t n) {
        std::vector<Slot> old(n, Slot{kEmpty, Value{}});
        old.swap(slots_);
        mask_ = n - 1;
        shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
        size_ = 0;
        for (const Slot& s : old)
            if (s.key != kEmpty)
                put(s.key, s.value);
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    unsigned shift_ = 0;
    std::size_t size_ = 0;
};

} // namespace gpumemprof::util
