// SPDX-License-Identifier: MIT
// FrameFilter (see frame_filter.hpp).
#include "report/frame_filter.hpp"

#include "util/options.hpp"

#include <fnmatch.h>

#include <cstring>

namespace gpumemprof::report {

FrameFilter::FrameFilter(const char* spec) {
    if (spec == nullptr)
        spec = kDefaultHiddenFrames;
    if (std::strcmp(spec, "none") != 0)
        patterns_ = util::split_list(spec);
}

bool FrameFilter::hidden(const SymbolFrame& f) const {
    if (patterns_.empty())
        return false;
    std::string key;
    key.reserve(f.module.size() + 1 + f.function.size());
    key += f.module;
    key += '\0';
    key += f.function;
    auto it = decided_.find(key);
    if (it == decided_.end())
        it = decided_.emplace(std::move(key), matches(f)).first;
    return it->second;
}

bool FrameFilter::matches(const SymbolFrame& f) const {
    for (const std::string& p : patterns_) {
        // No FNM_PATHNAME: '*' also crosses the '/' of operator/ and of template arguments.
        if (!f.function.empty() && fnmatch(p.c_str(), f.function.c_str(), 0) == 0)
            return true;
        if (!f.module.empty() && fnmatch(p.c_str(), f.module.c_str(), 0) == 0)
            return true;
    }
    return false;
}

} // namespace gpumemprof::report
