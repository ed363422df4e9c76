// SPDX-License-Identifier: MIT
// libunwind-based stack capture: unw_backtrace with the per-thread unwind cache.
#include "stacks/backtrace.hpp"

#include "stacks/unwinder_fds.hpp"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <mutex>
#include <new>

namespace gpumemprof::stacks {

namespace {

void enable_unwind_cache() noexcept {
    // Caches the unwind info per IP per thread, so repeated stacks unwind without re-reading
    // .eh_frame; heaptrack does the same.
    static std::once_flag once;
    std::call_once(once, [] {
        guard_unwinder_fds(); // before libunwind makes its validation pipe (its first call)
        unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
        // The DWARF register-state cache defaults to 128 entries: far fewer than the distinct
        // return addresses of a PyTorch step, which then re-parses .eh_frame on nearly every
        // frame (measured on the H200: stacks on cost 1.25x a step). 16K entries hold them.
        unw_set_cache_size(unw_local_addr_space, 16384, 0);
    });
}

/// The raw frames of one unwind live on the heap, one buffer per thread, so that a capture costs
/// the calling thread's stack only libunwind's own cursor (small stacks: docs/guarantees.md).
struct RawFrames {
    void* raw[kMaxFrames + 17];
};
thread_local RawFrames* tl_raw = nullptr;
thread_local bool tl_raw_gone = false;
struct RawFramesHolder {
    ~RawFramesHolder() {
        delete tl_raw;
        tl_raw = nullptr;
        tl_raw_gone = true;
    }
};
thread_local RawFramesHolder tl_raw_holder;

RawFrames* raw_frames() noexcept {
    if (tl_raw == nullptr && !tl_raw_gone) {
        tl_raw = new (std::nothrow) RawFrames;
        (void)&tl_raw_holder; // registers the thread-exit destructor
    }
    return tl_raw;
}

} // namespace

__attribute__((noinline)) int capture_backtrace(std::uintptr_t* ips, int max_frames, int skip) noexcept {
    if (ips == nullptr || max_frames <= 0)
        return 0;
    enable_unwind_cache();
    skip = std::clamp(skip, 0, 16);
    max_frames = std::min(max_frames, kMaxFrames);
    // One extra slot for this function's own frame, `skip` more for the caller's helpers.
    RawFrames* frames = raw_frames();
    if (frames == nullptr)
        return 0; // out of memory, or the thread is exiting: no stack rather than a large frame
    void** raw = frames->raw;
    const int want = max_frames + skip + 1;
    int n = unw_backtrace(raw, want);
    // libunwind may end a stack with bogus zero frames; drop them.
    while (n > 0 && raw[n - 1] == nullptr)
        --n;
    const int first = skip + 1;
    int out = 0;
    for (int i = first; i < n && out < max_frames; ++i)
        ips[out++] = reinterpret_cast<std::uintptr_t>(raw[i]) - 1;
    return out;
}

} // namespace gpumemprof::stacks
