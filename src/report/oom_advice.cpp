// SPDX-License-Identifier: MIT
// OOM message and advice (see oom_advice.hpp).
#include "report/oom_advice.hpp"

#include "report/byte_format.hpp"

#include <algorithm>

namespace gpumemprof::report {

std::string oom_message(int device, const pool::OomInfo& info) {
    const std::int64_t unallocated = info.reserved - info.allocated;
    std::string s = "CUDA out of memory. Tried to allocate " +
                    torch_size(static_cast<std::int64_t>(info.allocation_size)) + ". GPU " + std::to_string(device) +
                    " has a total capacity of " + torch_size(static_cast<std::int64_t>(info.device_total)) +
                    " of which " + torch_size(static_cast<std::int64_t>(info.device_free)) + " is free. ";
    if (info.allowed > 0)
        s += torch_size(static_cast<std::int64_t>(info.allowed)) + " allowed; ";
    s += "Of the allocated memory " + torch_size(info.allocated) + " is allocated by the pool, and " +
         torch_size(unallocated < 0 ? 0 : unallocated) +
         " is reserved by the pool but unallocated. The largest free cached block is " +
         torch_size(static_cast<std::int64_t>(info.largest_free_block)) + ". The program asked for " +
         std::to_string(info.requested) + " bytes (rounded to " + std::to_string(info.rounded) + ").";
    return s;
}

std::string oom_suggestion(const pool::OomInfo& info, const std::string& alloc_conf) {
    const std::int64_t unallocated = info.reserved - info.allocated;
    const auto need = static_cast<std::int64_t>(info.allocation_size);
    const bool expandable = alloc_conf.find("expandable_segments:True") != std::string::npos;
    if (unallocated > 0 && unallocated + static_cast<std::int64_t>(info.device_free) >= need) {
        // Enough memory existed, but split across cached blocks: fragmentation.
        if (!expandable)
            return "reserved but unallocated memory (" + torch_size(unallocated) + ") plus free memory would have "
                   "covered this request: set GPUMEMPROF_ALLOC_CONF=expandable_segments:True so cached segments "
                   "can grow instead of fragmenting (or max_split_size_mb:" +
                   std::to_string(std::max<std::int64_t>(20, need / 1048576)) +
                   " to stop large cached blocks from being split).";
        return "reserved but unallocated memory (" + torch_size(unallocated) + ") would have covered this request "
               "even with expandable segments on: free the cache (empty_cache) before the big request, or set "
               "garbage_collection_threshold:0.6 so idle cached blocks are released earlier.";
    }
    return "live allocations (" + torch_size(info.allocated) + ") leave no room for " + torch_size(need) +
           ": reduce what is live at this point (see the at-peak tree and the top call sites by bytes at the "
           "peak for the lines that hold it), free earlier, or use smaller batches.";
}

} // namespace gpumemprof::report
