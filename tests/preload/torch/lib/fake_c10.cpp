// SPDX-License-Identifier: MIT
// A stand-in for PyTorch's libc10.so: its allocator settings object
// (c10::CachingAllocator::AcceleratorAllocatorConfig, torch 2.11's member layout) and its
// rounding-divisions function, under their mangled names, read from PYTORCH_CUDA_ALLOC_CONF.
#include "fake_torch.hpp"

#include "pool/alloc_conf.hpp"
#include "pool/rounding.hpp"

#include <cstdlib>

namespace c10::CachingAllocator {

AcceleratorAllocatorConfig& AcceleratorAllocatorConfig::instance() {
    static AcceleratorAllocatorConfig* c = [] {
        auto* cfg = new AcceleratorAllocatorConfig();
        const char* env = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
        const auto conf = gpumemprof::pool::parse_alloc_conf(env ? env : "", nullptr);
        cfg->max_split_size_ = conf.max_split_size;
        cfg->use_expandable_segments_ = conf.expandable_segments;
        return cfg;
    }();
    return *c;
}

size_t AcceleratorAllocatorConfig::roundup_power2_divisions(size_t size) {
    static const auto conf = [] {
        const char* env = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
        return gpumemprof::pool::parse_alloc_conf(env ? env : "", nullptr);
    }();
    return gpumemprof::pool::divisions_for(conf, size);
}

} // namespace c10::CachingAllocator
