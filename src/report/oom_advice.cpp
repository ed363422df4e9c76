// SPDX-License-Identifier: MIT
// OOM message and advice (see oom_advice.hpp).
#include "report/oom_advice.hpp"

#include "util/byte_format.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace gpumemprof::report {

std::string oom_message(int device, const pool::OomInfo& info) {
    const std::int64_t unallocated = info.reserved - info.allocated;
    std::string s = "CUDA out of memory. Tried to allocate " + util::torch_size_u(info.allocation_size) + ". GPU " +
                    std::to_string(device) + " has a total capacity of " + util::torch_size_u(info.device_total) +
                    " of which " + util::torch_size_u(info.device_free) + " is free. ";
    if (info.allowed > 0)
        s += util::torch_size_u(info.allowed) + " allowed; ";
    s += "Of the allocated memory " + util::torch_size(info.allocated) + " is allocated by the pool, and " +
         util::torch_size(unallocated < 0 ? 0 : unallocated) +
         " is reserved by the pool but unallocated. The largest free cached block is " +
         util::torch_size_u(info.largest_free_block) + ". The program asked for " + std::to_string(info.requested) +
         " bytes (rounded to " + std::to_string(info.rounded) + ").";
    return s;
}

std::string oom_suggestion(const pool::OomInfo& info, const pool::AllocConf& conf) {
    const std::int64_t unallocated = info.reserved - info.allocated;
    if (info.allocation_size > info.device_total && info.device_total > 0)
        return "the request (" + util::torch_size_u(info.allocation_size) + ") is larger than the device (" +
               util::torch_size_u(info.device_total) +
               "): no setting can serve it; check how the program computes this size (a negative value turned "
               "unsigned, an overflow).";
    const auto need = static_cast<std::int64_t>(info.allocation_size);
    constexpr std::int64_t kMiB = static_cast<std::int64_t>(pool::kMiB);
    constexpr std::int64_t kMinSplitMb = 20; // PyTorch's (and the parser's) minimum max_split_size_mb
    if (unallocated > 0 && unallocated + static_cast<std::int64_t>(info.device_free) >= need) {
        // Enough memory existed, but split across cached blocks: fragmentation.
        const std::string head = "reserved but unallocated memory (" + util::torch_size(unallocated) +
                                 ") plus free memory would have covered this request";
        if (conf.expandable_segments)
            return head + " even with expandable_segments:True (its free pages went back to the device before "
                          "this failed; what is left is free space inside pages still partly in use): reduce what "
                          "is live at this point or call gpumemprof_empty_cache() between phases of the program.";
        if (conf.max_split_size == std::numeric_limits<std::size_t>::max())
            return head +
                   ": set GPUMEMPROF_ALLOC_CONF=expandable_segments:True (PyTorch's fix for fragmentation: "
                   "cached memory is mapped in pages that grow a block in place and go back to the device "
                   "when free; PYTORCH_CUDA_ALLOC_CONF on PyTorch's own allocator), or max_split_size_mb:" +
                   std::to_string(std::max(kMinSplitMb, need / kMiB)) +
                   " so large cached blocks are not split for small requests.";
        const auto split_mb = static_cast<std::int64_t>(conf.max_split_size / pool::kMiB);
        std::string s = head + " even with max_split_size_mb:" + std::to_string(split_mb) + ": ";
        if (split_mb / 2 >= kMinSplitMb)
            s += "try a smaller max_split_size_mb (e.g. " + std::to_string(split_mb / 2) + "), ";
        if (conf.per_process_memory_fraction > 0.0 && conf.garbage_collection_threshold > 0.0)
            s += "lower garbage_collection_threshold so idle cached blocks are released earlier, ";
        else
            s += "set garbage_collection_threshold:0.6 together with per_process_memory_fraction so idle cached "
                 "blocks are released earlier, ";
        return s + "or call gpumemprof_empty_cache() between phases of the program.";
    }
    return "live allocations (" + util::torch_size(info.allocated) + ") leave no room for " + util::torch_size(need) +
           ": reduce what is live at this point (see the at-peak tree and the top call sites by bytes at the "
           "peak for the lines that hold it), free earlier, or use smaller batches.";
}

std::string oom_suggestion(const pool::OomInfo& info, const std::string& alloc_conf) {
    std::vector<std::string> ignored;
    return oom_suggestion(info, pool::parse_alloc_conf(alloc_conf, &ignored));
}

} // namespace gpumemprof::report
