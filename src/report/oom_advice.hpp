// SPDX-License-Identifier: MIT
// OOM text in the shape of PyTorch's message, and a concrete suggestion for avoiding it.
#pragma once

#include "pool/alloc_conf.hpp"
#include "pool/device_pool.hpp"

#include <string>

namespace gpumemprof::report {

/// "CUDA out of memory. Tried to allocate {segment}. GPU {d} has a total capacity of {T} of which
/// {F} is free. {allowed}Of the allocated memory {A} is allocated by the pool, and {R} is
/// reserved by the pool but unallocated. ..." (sizes as PyTorch's format_size).
std::string oom_message(int device, const pool::OomInfo& info);

/// What setting or change would most likely have avoided this OOM, judged from the pool state and
/// the settings in force; only settings this pool implements are suggested. Reserved-but-unallocated
/// memory that, with the free memory, could have served the request points at fragmentation:
/// max_split_size_mb when it is unset; when it is set, a smaller one, garbage_collection_threshold
/// with per_process_memory_fraction, or gpumemprof_empty_cache() between phases. Otherwise the
/// live memory itself is too large.
std::string oom_suggestion(const pool::OomInfo& info, const pool::AllocConf& conf);

/// The same for GPUMEMPROF_ALLOC_CONF text (parsed with parse_alloc_conf, warnings discarded).
std::string oom_suggestion(const pool::OomInfo& info, const std::string& alloc_conf);

} // namespace gpumemprof::report
