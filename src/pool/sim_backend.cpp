// SPDX-License-Identifier: MIT
// Simulated device for the pool (see sim_backend.hpp).
#include "pool/sim_backend.hpp"

namespace gpumemprof::pool {

SimBackend::SimBackend(std::size_t capacity_bytes) : capacity_(capacity_bytes) {}

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
    *ptr = next_address_;
    next_address_ += span;
    used_ += size;
    live_.emplace(*ptr, size);
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
    if (free_bytes)
        *free_bytes = capacity_ > used_ ? capacity_ - used_ : 0;
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

void SimBackend::set_capacity(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = bytes;
}

void SimBackend::set_total(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    total_ = bytes;
}

SimBackend::Counters SimBackend::counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
}

std::size_t SimBackend::used_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return used_;
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
