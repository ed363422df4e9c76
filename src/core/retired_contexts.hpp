// SPDX-License-Identifier: MIT
// Destroyed contexts older than the ones the report keeps whole (PoolTable::kKeptDead): their
// figures folded into one entry per device, so that a program that makes a context per job gets
// a report of bounded size from a profiler of bounded memory.
#pragma once

#include "report/report_input.hpp"

#include <map>

namespace gpumemprof::core {

/// `d`'s figures added to `into`: counts summed, peaks the largest of any one context, the
/// fragmentation at the highest reserved peak; no history (the HTML page and the pickle show the
/// contexts kept whole). `into.folded_contexts` counts the contexts in it.
void fold_summary(report::DeviceSummary& into, const report::DeviceSummary& d);

/// One folded entry per device. Not thread-safe: the pool table's lock guards it.
class RetiredContexts {
public:
    /// `d` is a destroyed context's summary (without history).
    void fold(const report::DeviceSummary& d);
    /// The folded entries, by device.
    const std::map<int, report::DeviceSummary>& entries() const { return entries_; }
    void clear() { entries_.clear(); }

private:
    std::map<int, report::DeviceSummary> entries_;
};

} // namespace gpumemprof::core
