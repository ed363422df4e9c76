// SPDX-License-Identifier: MIT
#include "tools/site_key.hpp"

#include <cstdio>

namespace gpumemprof::tools {

std::string frame_key(const report::SymbolFrame& f) {
    if (!f.file.empty())
        return f.file + ":" + std::to_string(f.line) + ":" + f.function;
    if (!f.function.empty())
        return f.module + ":" + f.function;
    char off[32];
    std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(f.offset));
    return f.module + off;
}

std::string SiteKeys::site_key(const report::SymbolFrame* user_frame,
                               const std::vector<const report::SymbolFrame*>& frames) const {
    if (user_frame)
        return frame_key(*user_frame);
    for (const report::SymbolFrame* f : frames)
        if (!hidden_.hidden(*f))
            return frame_key(*f);
    return frames.empty() ? std::string("(no stack)") : frame_key(*frames.front());
}

} // namespace gpumemprof::tools
