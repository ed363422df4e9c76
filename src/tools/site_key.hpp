// SPDX-License-Identifier: MIT
// How `gpumemprof merge` and `gpumemprof diff` name a call site across reports: by one line of
// the program's own code, so that the same line matches in every rank and in two builds.
#pragma once

#include "report/frame_filter.hpp"
#include "report/symbolizer.hpp"

#include <string>
#include <vector>

namespace gpumemprof::tools {

/// "file:line:function"; without a file "module:function"; without a function either
/// "module+0xoffset".
std::string frame_key(const report::SymbolFrame& f);

/// Names call sites (one place for every input: reports, traces, partial merges).
class SiteKeys {
public:
    SiteKeys() : hidden_(nullptr) {}

    /// The key of a site: its user frame when the report names one (`user_frame`, may be null),
    /// else its innermost frame that the reports' default GPUMEMPROF_HIDE_FRAMES does not hide
    /// (allocator and dispatch plumbing), else its innermost frame; "(no stack)" without frames.
    /// `frames` innermost first.
    std::string site_key(const report::SymbolFrame* user_frame,
                         const std::vector<const report::SymbolFrame*>& frames) const;

private:
    report::FrameFilter hidden_;
};

} // namespace gpumemprof::tools
