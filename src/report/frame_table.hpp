// SPDX-License-Identifier: MIT
// Every distinct source frame of one report, once: the call sites and OOMs of a ResolvedReport
// name their frames by index into it (and the JSON's "frames" array is this table).
#pragma once

#include "report/symbolizer.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpumemprof::report {

class FrameTable {
public:
    /// The index of `f`, added if no frame equal in every field (function, file, line, module,
    /// offset, python) is there yet.
    std::uint32_t add(const SymbolFrame& f);

    const SymbolFrame& operator[](std::uint32_t i) const { return frames_[i]; }
    std::size_t size() const { return frames_.size(); }

    /// The label id of frame `i`: frames with equal frame_label() (file:line:function) have equal
    /// ids. The reports merge call sites and build their trees by label.
    std::uint32_t label(std::uint32_t i) const { return label_of_[i]; }
    const std::string& label_text(std::uint32_t label) const { return labels_[label]; }
    std::size_t label_count() const { return labels_.size(); }

private:
    std::vector<SymbolFrame> frames_;
    std::vector<std::uint32_t> label_of_;
    std::vector<std::string> labels_;
    std::unordered_map<std::string, std::uint32_t> by_content_, by_label_;
};

} // namespace gpumemprof::report
