// SPDX-License-Identifier: MIT
// Folded stack output (see folded_writer.hpp).
#include "report/folded_writer.hpp"

#include <algorithm>
#include <vector>

namespace gpumemprof::report {

std::string folded_frame(const SymbolFrame& f) {
    std::string s;
    if (!f.file.empty()) {
        const std::size_t slash = f.file.rfind('/');
        s = (f.function.empty() ? std::string("??") : f.function) + " (" +
            f.file.substr(slash == std::string::npos ? 0 : slash + 1) + ":" + std::to_string(f.line) + ")";
    } else {
        s = frame_label(f);
    }
    for (char& c : s) {
        if (c == ';')
            c = ':';
        else if (c == '\n' || c == '\r')
            c = ' ';
    }
    return s;
}

std::string folded_stacks(const ResolvedReport& r, FoldedMetric metric) {
    std::vector<std::string> lines;
    for (const ResolvedSite& s : r.sites) {
        std::int64_t w = 0;
        switch (metric) {
        case FoldedMetric::peak_live_bytes: w = s.counters.peak_live_bytes; break;
        case FoldedMetric::total_bytes: w = s.counters.total_bytes; break;
        case FoldedMetric::leaked_bytes: w = s.counters.live_bytes; break;
        }
        if (w <= 0)
            continue;
        std::string line;
        for (const SymbolFrame& f : s.frames) {
            if (!line.empty())
                line += ';';
            line += folded_frame(f);
        }
        if (line.empty())
            line = "[no stack]";
        line += ' ';
        line += std::to_string(w);
        lines.push_back(std::move(line));
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const std::string& l : lines) {
        out += l;
        out += '\n';
    }
    return out;
}

} // namespace gpumemprof::report
