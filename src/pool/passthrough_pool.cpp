// SPDX-License-Identifier: MIT
// The pool without caching (see passthrough_pool.hpp).
#include "pool/passthrough_pool.hpp"

#include "pool/rounding.hpp"

#include <algorithm>

namespace gpumemprof::pool::detail {

int PassthroughPool::malloc(std::size_t size, std::uintptr_t stream, std::uintptr_t* out, RequestSite site) {
    const std::size_t bsize = round_size(AllocConf{}, std::max<std::size_t>(size, 1));
    BlockPool& pool = s_.store.pool_for(bsize);
    s_.ensure_spares();
    int err = kOutOfMemory;
    Block* b = policy_.alloc_block(pool, stream, bsize, false, &err, site);
    if (b == nullptr) {
        if (err != kOutOfMemory)
            return err;
        return policy_.out_of_memory(size, bsize, bsize, err, site);
    }
    b = policy_.alloc_found_block(b, bsize, size, false, pool.blocks.end(), site);
    *out = b->ptr;
    s_.note_reserved_peak();
    return kSuccess;
}

int PassthroughPool::free(std::uintptr_t ptr) {
    int rc = kSuccess;
    Block* b = policy_.take_back(ptr, &rc);
    if (b == nullptr)
        return rc;
    // A free without caching is the driver's own: its answer is the program's (after a kernel's
    // fault, a real cudaFree synchronises and answers that fault).
    return segments_.release(policy_.free_block(b));
}

} // namespace gpumemprof::pool::detail
