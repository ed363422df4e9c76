// SPDX-License-Identifier: MIT
// The pool's state and recent history in the shape of torch.cuda.memory._snapshot(): the dict
// that torch.cuda.memory._dump_snapshot pickles and that PyTorch's memory viewer
// (pytorch.org/memory_viz, python -m torch.cuda._memory_viz) reads:
//   {"segments": [{device, address, total_size, allocated_size, active_size, requested_size,
//                  stream, segment_type, segment_pool_id, is_expandable, frames,
//                  blocks: [{address, size, requested_size, state, frames}]}],
//    "device_traces": [[{action, addr, size, stream, time_us, frames}], ...one list per device],
//    "allocator_settings": {...}}
// Frames are {"filename", "line", "name"}, innermost first. Segments are the state after the
// last trace event (the viewer replays the trace backwards from them).
#pragma once

#include "report/object_writer.hpp"
#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"
#include "stacks/report_data.hpp"
#include "util/output_sink.hpp"

#include <string>

namespace gpumemprof::report {

void write_torch_snapshot(ObjectWriter& w, const ReportInput& in, const stacks::ReportData& data,
                          const ResolvedReport& resolved);

/// The pickle into `out` as it is made (<prefix>.pickle); false when `out` failed. May throw.
bool write_torch_snapshot_pickle(util::OutputSink& out, const ReportInput& in, const stacks::ReportData& data,
                                 const ResolvedReport& resolved);
/// The same dict as JSON (the C API). Never throws; an empty string on failure.
std::string torch_snapshot_json(const ReportInput& in, const stacks::ReportData& data, const ResolvedReport& resolved);

} // namespace gpumemprof::report
