// SPDX-License-Identifier: MIT
// The pool without caching (GPUMEMPROF_POOL=0, PYTORCH_NO_CUDA_MEMORY_CACHING-like): every malloc
// is one segment of max(size, 1) rounded up to 512 bytes, handed out whole; every free gives it
// back at once (defer_frees ignored). Block size = segment size, so reserved == allocated == the
// 512-rounded sizes and requested_bytes keeps the exact sizes; the statistics and the listener
// see what they see in caching mode.
#pragma once

#include "pool/caching_policy.hpp"
#include "pool/plain_segments.hpp"

namespace gpumemprof::pool::detail {

class PassthroughPool {
public:
    PassthroughPool(PoolState& s, CachingPolicy& policy, PlainSegments& segments)
        : s_(s), policy_(policy), segments_(segments) {}

    int malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* out, RequestSite site);
    /// CachingPolicy::take_back, then PyTorch's order for an allocator without caching: the free
    /// completes, then the segment goes back. A passthrough block is never split, so free_block
    /// merges nothing. kSuccess, or take_back's code.
    int free(std::uintptr_t ptr);

private:
    PoolState& s_;
    CachingPolicy& policy_;
    PlainSegments& segments_;
};

} // namespace gpumemprof::pool::detail
