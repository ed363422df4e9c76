// SPDX-License-Identifier: MIT
// ExpandableSegment: pages of device memory mapped into one reserved address range (see the header).
#include "pool/expandable_segment.hpp"

namespace gpumemprof::pool {

int ExpandableSegment::create(Backend& backend, std::size_t page_size, std::size_t max_pages,
                              std::unique_ptr<ExpandableSegment>* out) {
    if (page_size == 0 || max_pages == 0)
        return kInvalidValue;
    std::uintptr_t base = 0;
    const int rc = backend.address_reserve(page_size * max_pages, &base);
    if (rc != kSuccess)
        return rc;
    try {
        out->reset(new ExpandableSegment(backend, base, page_size, max_pages));
    } catch (...) {
        backend.address_free(base, page_size * max_pages);
        return kOutOfMemory;
    }
    return kSuccess;
}

int ExpandableSegment::map(std::uintptr_t ptr, std::size_t size, std::size_t* mapped) {
    const std::size_t begin = (ptr - base_) / page_size_;
    const std::size_t end = (ptr - base_ + size + page_size_ - 1) / page_size_;
    if (size == 0 || (ptr - base_) % page_size_ != 0 || end > max_pages_)
        return kInvalidValue;
    try {
        if (pages_.size() < end)
            pages_.resize(end, 0); // before any driver call: a host out-of-memory changes nothing
    } catch (...) {
        return kOutOfMemory;
    }
    for (std::size_t i = begin; i < end; ++i)
        if (pages_[i] != 0)
            return kInvalidValue; // already mapped: the pool's bookkeeping would be wrong
    auto give_back = [&](std::size_t created_end, std::size_t mapped_end) {
        for (std::size_t i = begin; i < mapped_end; ++i)
            backend_.page_unmap(base_ + i * page_size_, page_size_);
        for (std::size_t i = begin; i < created_end; ++i) {
            backend_.page_release(pages_[i]);
            pages_[i] = 0;
        }
        while (!pages_.empty() && pages_.back() == 0)
            pages_.pop_back();
    };
    // All pages first, as PyTorch does: running out of memory halfway maps nothing.
    for (std::size_t i = begin; i < end; ++i) {
        PageHandle h = 0;
        const int rc = backend_.page_create(page_size_, &h);
        if (rc != kSuccess || h == 0) {
            give_back(i, begin);
            return rc != kSuccess ? rc : kOutOfMemory;
        }
        pages_[i] = h;
    }
    for (std::size_t i = begin; i < end; ++i) {
        const int rc = backend_.page_map(base_ + i * page_size_, page_size_, pages_[i]);
        if (rc != kSuccess) {
            give_back(end, i);
            return rc;
        }
    }
    const int rc = backend_.set_access(base_ + begin * page_size_, (end - begin) * page_size_);
    if (rc != kSuccess) {
        give_back(end, end);
        return rc;
    }
    mapped_pages_ += end - begin;
    *mapped = (end - begin) * page_size_;
    return kSuccess;
}

std::size_t ExpandableSegment::whole_pages_bytes(std::uintptr_t ptr, std::size_t size) const {
    const std::size_t begin = (ptr - base_ + page_size_ - 1) / page_size_;
    const std::size_t end = (ptr - base_ + size) / page_size_;
    return begin < end ? (end - begin) * page_size_ : 0;
}

void ExpandableSegment::unmap(std::uintptr_t ptr, std::size_t size, std::uintptr_t* first, std::size_t* unmapped) {
    const std::size_t begin = (ptr - base_ + page_size_ - 1) / page_size_;
    const std::size_t end = (ptr - base_ + size) / page_size_;
    if (begin >= end || end > pages_.size()) {
        *first = ptr;
        *unmapped = 0;
        return;
    }
    unmap_pages(begin, end);
    *first = base_ + begin * page_size_;
    *unmapped = (end - begin) * page_size_;
}

void ExpandableSegment::unmap_pages(std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
        if (pages_[i] == 0)
            continue;
        backend_.page_unmap(base_ + i * page_size_, page_size_);
        backend_.page_release(pages_[i]);
        pages_[i] = 0;
        --mapped_pages_;
    }
    while (!pages_.empty() && pages_.back() == 0)
        pages_.pop_back();
}

void ExpandableSegment::release() {
    unmap_pages(0, pages_.size());
    backend_.address_free(base_, size());
}

} // namespace gpumemprof::pool
