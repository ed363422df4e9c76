// SPDX-License-Identifier: MIT
// Global operator new/delete replacements for the tests that count or fail allocations
// (see counting_new.hpp).
#include "counting_new.hpp"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_news{0};
std::atomic<long> g_fail_in{-1}; ///< >= 0: the allocation after this many more throws
std::atomic<long> g_thrown{0};

/// The throwing forms: counted, and failed when armed.
void note_throwing_new() {
    if (g_counting.load(std::memory_order_relaxed))
        g_news.fetch_add(1, std::memory_order_relaxed);
    if (g_fail_in.load(std::memory_order_relaxed) >= 0 && g_fail_in.fetch_sub(1) == 0) {
        g_thrown.fetch_add(1);
        throw std::bad_alloc();
    }
}

void* plain_alloc(std::size_t n) noexcept {
    return std::malloc(n != 0 ? n : 1);
}

void* aligned_alloc_(std::size_t n, std::align_val_t al) noexcept {
    void* p = nullptr;
    // align_val_t alignments are powers of two above the default one, as posix_memalign wants.
    if (posix_memalign(&p, static_cast<std::size_t>(al), n != 0 ? n : 1) != 0)
        return nullptr;
    return p;
}

void* counted_new(std::size_t n) {
    note_throwing_new();
    if (void* p = plain_alloc(n))
        return p;
    throw std::bad_alloc();
}

void* counted_new_aligned(std::size_t n, std::align_val_t al) {
    note_throwing_new();
    if (void* p = aligned_alloc_(n, al))
        return p;
    throw std::bad_alloc();
}

} // namespace

namespace counting_new {

void start_counting() {
    g_news.store(0);
    g_counting.store(true);
}

long stop_counting() {
    g_counting.store(false);
    return g_news.load();
}

void fail_after(long n) {
    g_fail_in.store(n < 0 ? -1 : n);
}

long thrown() {
    return g_thrown.load();
}

} // namespace counting_new

void* operator new(std::size_t n) {
    return counted_new(n);
}
void* operator new[](std::size_t n) {
    return counted_new(n);
}
void* operator new(std::size_t n, std::align_val_t al) {
    return counted_new_aligned(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al) {
    return counted_new_aligned(n, al);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return plain_alloc(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return plain_alloc(n);
}
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
    return aligned_alloc_(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
    return aligned_alloc_(n, al);
}

void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
