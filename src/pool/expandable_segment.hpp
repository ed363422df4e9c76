// SPDX-License-Identifier: MIT
// One expandable segment (PyTorch's ExpandableSegment, "Note [Expandable Segments]"): a reserved
// range of device address space whose pages are backed by physical memory on demand. One page is
// one cuMemCreate handle; mapping creates every page of a range first (an out-of-memory on any of
// them gives the ones created back and maps nothing), then maps them one by one and grants the
// device access to the whole range at once; unmapping unmaps and releases page by page.
// Owned by DevicePool (one per stream and small/large pool); all calls under the pool's lock.
#pragma once

#include "pool/backend.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace gpumemprof::pool {

class ExpandableSegment {
public:
    /// Reserve `max_pages` pages of `page_size` bytes of address space. Returns kSuccess and *out,
    /// or the backend's code (nothing reserved).
    static int create(Backend& backend, std::size_t page_size, std::size_t max_pages,
                      std::unique_ptr<ExpandableSegment>* out);
    ~ExpandableSegment() = default; ///< never calls the backend (see release())
    ExpandableSegment(const ExpandableSegment&) = delete;
    ExpandableSegment& operator=(const ExpandableSegment&) = delete;

    std::uintptr_t base() const { return base_; }
    std::size_t size() const { return page_size_ * max_pages_; }
    std::size_t page_size() const { return page_size_; }
    std::size_t mapped_bytes() const { return mapped_pages_ * page_size_; }

    /// Back [ptr, ptr + size) with memory: `ptr` is page-aligned and unmapped; the range grows to
    /// whole pages. Returns kSuccess and *mapped (bytes mapped from ptr), or an error with nothing
    /// changed (kOutOfMemory when the device has no room for the pages).
    int map(std::uintptr_t ptr, std::size_t size, std::size_t* mapped);
    /// Give back the whole pages inside [ptr, ptr + size) (all mapped). *first / *unmapped: the
    /// range given back (*unmapped == 0: no whole page inside). Driver errors are not reported:
    /// a page the driver refused to unmap is forgotten all the same, as a failed cudaFree is.
    void unmap(std::uintptr_t ptr, std::size_t size, std::uintptr_t* first, std::size_t* unmapped);
    /// Whole pages inside [ptr, ptr + size), in bytes: what unmap() of that range would give back.
    std::size_t whole_pages_bytes(std::uintptr_t ptr, std::size_t size) const;
    /// Unmap what is still mapped and free the address range. Call once, before destruction.
    void release();

private:
    ExpandableSegment(Backend& backend, std::uintptr_t base, std::size_t page_size, std::size_t max_pages)
        : backend_(backend), base_(base), page_size_(page_size), max_pages_(max_pages) {}
    void unmap_pages(std::size_t begin, std::size_t end);

    Backend& backend_;
    std::uintptr_t base_;
    std::size_t page_size_;
    std::size_t max_pages_;
    std::size_t mapped_pages_ = 0;
    std::vector<PageHandle> pages_; ///< page i's handle, 0 = unmapped; trimmed after the last mapped
};

} // namespace gpumemprof::pool
