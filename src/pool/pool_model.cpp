// SPDX-License-Identifier: MIT
// PoolModel: PyTorch's allocator fed the real pool's requests (see pool_model.hpp).
#include "pool/pool_model.hpp"

namespace gpumemprof::pool {

namespace {

PoolOptions model_options(const AllocConf& conf, int device) {
    PoolOptions o;
    o.conf = conf;
    o.mode = Mode::caching;
    o.defer_frees = false; // PyTorch's rule: a freed block is reusable at once on its stream
    o.device = device;
    return o;
}

} // namespace

PoolModel::PoolModel(const AllocConf& conf, int device, std::size_t capacity)
    : backend_(capacity > 0 ? capacity : std::size_t{80} << 30), pool_(backend_, model_options(conf, device)) {
}

void PoolModel::on_alloc(std::uintptr_t real_ptr, std::size_t requested, std::uintptr_t stream) noexcept {
    try {
        std::lock_guard lock(mutex_);
        std::uintptr_t model_ptr = 0;
        if (pool_.malloc(requested, stream, &model_ptr) != kSuccess) {
            ++unserved_;
            return;
        }
        map_.put(real_ptr, model_ptr);
    } catch (...) {
        ++unserved_; // out of host memory growing the map: this block is left out of the model
    }
}

void PoolModel::on_free(std::uintptr_t real_ptr) noexcept {
    std::lock_guard lock(mutex_);
    std::uintptr_t model_ptr = 0;
    if (map_.take(real_ptr, &model_ptr))
        (void)pool_.free(model_ptr);
}

stats::DeviceStats PoolModel::stats() const {
    return pool_.stats();
}
ReservedPeak PoolModel::reserved_peak() const {
    return pool_.reserved_peak();
}
void PoolModel::reset_peak_stats() {
    pool_.reset_peak_stats();
}
void PoolModel::reset_accumulated_stats() {
    pool_.reset_accumulated_stats();
}
void PoolModel::empty_cache() {
    pool_.empty_cache();
}

void PoolModel::drop_all() {
    std::lock_guard lock(mutex_);
    map_.clear();
    pool_.drop_all();
}

std::size_t PoolModel::reserved_bytes() const {
    // The model's segments are all its device holds; read without a lock (the memory history
    // reads it after each allocation and free, right after this thread's on_alloc / on_free).
    return backend_.used_bytes();
}

std::int64_t PoolModel::unserved() const {
    std::lock_guard lock(mutex_);
    return unserved_;
}

} // namespace gpumemprof::pool
