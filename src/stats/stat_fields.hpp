// SPDX-License-Identifier: MIT
// The one list of DeviceStats fields: the struct's members, names, flattening, JSON and resets are
// all generated from it.
#pragma once

// X(name): a StatArray member of DeviceStats ({all, small_pool, large_pool} x 4 values).
#define GPUMEMPROF_STAT_ARRAYS(X)                                                                                      \
    X(allocation)                                                                                                      \
    X(segment)                                                                                                         \
    X(active)                                                                                                          \
    X(inactive_split)                                                                                                  \
    X(allocated_bytes)                                                                                                 \
    X(reserved_bytes)                                                                                                  \
    X(active_bytes)                                                                                                    \
    X(inactive_split_bytes)                                                                                            \
    X(requested_bytes)

// X(name): a single Stat member (4 values).
#define GPUMEMPROF_STAT_SINGLES(X)                                                                                     \
    X(oversize_allocations)                                                                                            \
    X(oversize_segments)

// X(name): a plain int64 event counter, zeroed by reset_accumulated (resetAccumulatedStats).
#define GPUMEMPROF_STAT_COUNTERS(X)                                                                                    \
    X(num_alloc_retries)                                                                                               \
    X(num_ooms)                                                                                                        \
    X(num_sync_all_streams)                                                                                            \
    X(num_device_alloc)                                                                                                \
    X(num_device_free)

// X(name): a plain int64 constant, untouched by every reset.
#define GPUMEMPROF_STAT_CONSTANTS(X) X(max_split_size)
