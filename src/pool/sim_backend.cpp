// SPDX-License-Identifier: MIT
// Simulated device for the pool (see sim_backend.hpp).
#include "pool/sim_backend.hpp"

#include <algorithm>

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
    try {
        live_.emplace(next_address_, size);
    } catch (...) { // host memory: the device "fails" as a driver would, nothing changed
        ++counters_.allocate_failures;
        return kOutOfMemory;
    }
    *ptr = next_address_;
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
