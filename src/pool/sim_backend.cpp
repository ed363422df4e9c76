// SPDX-License-Identifier: MIT
// Simulated device for the pool (see sim_backend.hpp).
#include "pool/sim_backend.hpp"

#include <algorithm>
#include <iterator>
#include <memory>

namespace gpumemprof::pool {

SimBackend::SimBackend(std::size_t capacity_bytes) : capacity_(capacity_bytes) {
}

int SimBackend::allocate(std::size_t size, std::uintptr_t* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.allocate_calls;
    if (fail_next_ != 0) {
        const int code = fail_next_;
        fail_next_ = 0;
        ++counters_.allocate_failures;
        return code;
    }
    if (ptr == nullptr || size == 0) {
        ++counters_.allocate_failures;
        return kInvalidValue;
    }
    if (size > capacity_ || used_ > capacity_ - size) {
        ++counters_.allocate_failures;
        return kOutOfMemory;
    }
    const std::size_t span = (size + kAlignment - 1) / kAlignment * kAlignment;
    std::uintptr_t at = next_address_;
    bool planned = false;
    if (have_planned_ && planned_.second == size) {
        const std::uintptr_t want = planned_.first;
        planned = true;
        for (const auto& [p, n] : live_)
            if (want < p + n && p < want + size)
                planned = false; // the replay diverged from the recording: place it elsewhere
        if (planned)
            at = want;
    }
    try {
        live_.emplace(at, size);
    } catch (...) { // host memory: the device "fails" as a driver would, nothing changed
        ++counters_.allocate_failures;
        return kOutOfMemory;
    }
    *ptr = at;
    if (planned)
        have_planned_ = plan_ && plan_(&planned_);
    else
        next_address_ += span;
    used_ += size;
    return kSuccess;
}

int SimBackend::release(std::uintptr_t ptr, std::size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.release_calls;
    auto it = live_.find(ptr);
    if (it == live_.end() || it->second != size) {
        ++counters_.bad_releases;
        return kInvalidValue;
    }
    used_ -= it->second;
    live_.erase(it);
    return kSuccess;
}

int SimBackend::memory_info(std::size_t* free_bytes, std::size_t* total_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.memory_info_calls;
    if (free_bytes) {
        const std::size_t used = used_.load();
        *free_bytes = capacity_ > used ? capacity_ - used : 0;
    }
    if (total_bytes)
        *total_bytes = total_ != 0 ? total_ : capacity_;
    return kSuccess;
}

FenceId SimBackend::fence_record() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!record_allowed_)
        return 0;
    ++counters_.fence_records;
    const FenceId id = ++last_fence_;
    if (!fences_busy_)
        done_upto_ = id; // nothing is running on the simulated device: done at once
    return id;
}

bool SimBackend::fence_done(FenceId fence) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.fence_queries;
    return fence <= done_upto_;
}

bool SimBackend::fence_wait(FenceId fence) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.fence_waits;
    if (fence <= done_upto_)
        return true;
    if (!wait_allowed_)
        return false;
    done_upto_ = fence; // waiting lets the device run up to the fence (fences finish in order)
    return true;
}

bool SimBackend::fence_wait_for(FenceId fence, std::uint64_t) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.bounded_waits;
    if (fence <= done_upto_)
        return true;
    if (!wait_allowed_ || waits_time_out_)
        return false;
    done_upto_ = fence;
    return true;
}

void SimBackend::set_address_plan(std::vector<std::pair<std::uintptr_t, std::size_t>> plan) {
    std::uintptr_t top = 0;
    for (const auto& [a, n] : plan)
        top = std::max(top, a + n);
    auto held = std::make_shared<std::vector<std::pair<std::uintptr_t, std::size_t>>>(std::move(plan));
    set_address_plan(
        [held, i = std::size_t{0}](std::pair<std::uintptr_t, std::size_t>* out) mutable {
            if (i == held->size())
                return false;
            *out = (*held)[i++];
            return true;
        },
        top);
}

void SimBackend::set_address_plan(PlanSource next, std::uintptr_t top) {
    std::lock_guard<std::mutex> lock(mu_);
    plan_ = std::move(next);
    have_planned_ = plan_ && plan_(&planned_);
    if (top == 0)
        return; // nothing planned
    // Unplanned segments and reservations go above every planned one.
    next_address_ = std::max(next_address_, (top + kAlignment - 1) / kAlignment * kAlignment);
    next_vmm_address_ = std::max(next_vmm_address_, next_address_ + (std::uintptr_t{1} << 40));
}

bool SimBackend::frees_ordered() {
    std::lock_guard<std::mutex> lock(mu_);
    return frees_ordered_;
}

void SimBackend::set_frees_ordered(bool ordered) {
    std::lock_guard<std::mutex> lock(mu_);
    frees_ordered_ = ordered;
}

void SimBackend::set_waits_time_out(bool time_out) {
    std::lock_guard<std::mutex> lock(mu_);
    waits_time_out_ = time_out;
}

void SimBackend::fence_release(FenceId) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.fence_releases;
}

void SimBackend::set_fences_busy(bool busy) {
    std::lock_guard<std::mutex> lock(mu_);
    fences_busy_ = busy;
}

void SimBackend::complete_fences() {
    std::lock_guard<std::mutex> lock(mu_);
    done_upto_ = last_fence_;
}

void SimBackend::complete_fences_through(FenceId fence) {
    std::lock_guard<std::mutex> lock(mu_);
    done_upto_ = std::max(done_upto_, std::min(fence, last_fence_));
}

FenceId SimBackend::last_fence() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_fence_;
}

void SimBackend::set_fence_record_allowed(bool allowed) {
    std::lock_guard<std::mutex> lock(mu_);
    record_allowed_ = allowed;
}

void SimBackend::set_fence_wait_allowed(bool allowed) {
    std::lock_guard<std::mutex> lock(mu_);
    wait_allowed_ = allowed;
}

void SimBackend::fail_next_allocate(int code) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = code;
}

void SimBackend::set_total(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    total_ = bytes;
}

int SimBackend::vmm_granularity(std::size_t* bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    *bytes = granularity_;
    return kSuccess;
}

int SimBackend::address_reserve(std::size_t size, std::uintptr_t* va) {
    std::lock_guard<std::mutex> lock(mu_);
    if (va == nullptr || size == 0 || size % granularity_ != 0) {
        ++counters_.bad_vmm_calls;
        return kInvalidValue;
    }
    ++counters_.address_reserves;
    *va = next_vmm_address_;
    next_vmm_address_ += (size + kAlignment - 1) / kAlignment * kAlignment;
    reservations_.emplace(*va, size);
    return kSuccess;
}

int SimBackend::address_free(std::uintptr_t va, std::size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reservations_.find(va);
    auto m = mappings_.lower_bound(va);
    if (it == reservations_.end() || it->second != size || (m != mappings_.end() && m->first < va + size)) {
        ++counters_.bad_vmm_calls; // unknown range, wrong size, or something still mapped in it
        return kInvalidValue;
    }
    ++counters_.address_frees;
    reservations_.erase(it);
    return kSuccess;
}

int SimBackend::page_create(std::size_t size, PageHandle* page) {
    std::lock_guard<std::mutex> lock(mu_);
    if (page == nullptr || size == 0 || size % granularity_ != 0) {
        ++counters_.bad_vmm_calls;
        return kInvalidValue;
    }
    if (create_failure_code_ != 0) {
        if (create_failure_countdown_ == 0) {
            const int code = create_failure_code_;
            create_failure_code_ = 0;
            ++counters_.vmm_failures;
            return code;
        }
        --create_failure_countdown_;
    }
    if (size > capacity_ || used_ > capacity_ - size) {
        ++counters_.vmm_failures;
        return kOutOfMemory;
    }
    ++counters_.page_creates;
    used_ += size;
    *page = next_page_++;
    pages_.emplace(*page, Page{size, false});
    return kSuccess;
}

int SimBackend::page_release(PageHandle page) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pages_.find(page);
    if (it == pages_.end() || it->second.mapped) {
        ++counters_.bad_vmm_calls; // unknown, or released while mapped (the pool never does that)
        return kInvalidValue;
    }
    ++counters_.page_releases;
    used_ -= it->second.size;
    pages_.erase(it);
    return kSuccess;
}

int SimBackend::page_map(std::uintptr_t va, std::size_t size, PageHandle page) {
    std::lock_guard<std::mutex> lock(mu_);
    auto p = pages_.find(page);
    auto r = reservations_.upper_bound(va);
    const bool in_reservation = r != reservations_.begin() && va + size <= std::prev(r)->first + std::prev(r)->second;
    auto m = mappings_.lower_bound(va);
    const bool overlaps = (m != mappings_.end() && m->first < va + size) ||
                          (m != mappings_.begin() && std::prev(m)->first + std::prev(m)->second.size > va);
    if (p == pages_.end() || p->second.mapped || p->second.size != size || va % granularity_ != 0 || !in_reservation ||
        overlaps) {
        ++counters_.bad_vmm_calls;
        return kInvalidValue;
    }
    if (fail_next_map_ != 0) {
        const int code = fail_next_map_;
        fail_next_map_ = 0;
        ++counters_.vmm_failures;
        return code;
    }
    ++counters_.page_maps;
    p->second.mapped = true;
    mappings_.emplace(va, Mapping{size, page});
    mapped_ += size;
    return kSuccess;
}

int SimBackend::page_unmap(std::uintptr_t va, std::size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = mappings_.find(va);
    if (m == mappings_.end() || m->second.size != size) {
        ++counters_.bad_vmm_calls;
        return kInvalidValue;
    }
    ++counters_.page_unmaps;
    pages_[m->second.page].mapped = false;
    mapped_ -= size;
    mappings_.erase(m);
    return kSuccess;
}

int SimBackend::set_access(std::uintptr_t va, std::size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    // Every byte of the range must be mapped (cuMemSetAccess fails otherwise).
    std::uintptr_t p = va;
    while (p < va + size) {
        auto m = mappings_.find(p);
        if (m == mappings_.end()) {
            ++counters_.bad_vmm_calls;
            return kInvalidValue;
        }
        p += m->second.size;
    }
    ++counters_.set_accesses;
    return kSuccess;
}

void SimBackend::fail_page_create_after(std::size_t successes, int code) {
    std::lock_guard<std::mutex> lock(mu_);
    create_failure_countdown_ = successes;
    create_failure_code_ = code;
}

void SimBackend::fail_next_page_map(int code) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_map_ = code;
}

void SimBackend::set_granularity(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    granularity_ = bytes;
}

std::size_t SimBackend::mapped_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return mapped_;
}

std::size_t SimBackend::live_pages() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pages_.size();
}

std::size_t SimBackend::live_reservations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reservations_.size();
}

SimBackend::Counters SimBackend::counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
}

std::size_t SimBackend::live_segments() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
}

std::size_t SimBackend::capacity() const {
    std::lock_guard<std::mutex> lock(mu_);
    return capacity_;
}

} // namespace gpumemprof::pool
