// SPDX-License-Identifier: MIT
// JSON of one device's pool figures that the exit JSON and the HTML report's data both carry.
#pragma once

#include "report/report_input.hpp"
#include "util/json_writer.hpp"

namespace gpumemprof::report {

/// "at_reserved_peak": {"reserved", "allocated", "inactive_split_bytes"}, the pool at the moment its
/// reserved bytes peaked (pool::ReservedPeak).
void write_reserved_peak(util::JsonWriter& w, const pool::ReservedPeak& p);

/// `key`: {"memory_stats", "unserved", "at_reserved_peak"} of PyTorch's caching allocator on the
/// requests our pool served (pool::PoolModel). Only for a device with a model (d.has_model).
/// "allocator" and, for PyTorch's attached allocator, its private pools, how well the rebuilt
/// state fit its events, and its own statistics read at exit against ours at that moment.
void write_allocator(util::JsonWriter& w, const DeviceSummary& d);

void write_model(util::JsonWriter& w, const char* key, const DeviceSummary& d);

/// "timeline": {"changes", "slot_ns", "t_ns": [...], "bytes": {kind: [...]}}, PyTorch's live
/// bytes by kind over time (DeviceSummary::kind_points), for "memory_kinds" and the HTML.
void write_kind_timeline(util::JsonWriter& w, const DeviceSummary& d);

} // namespace gpumemprof::report
