// SPDX-License-Identifier: MIT
#include "core/output_names.hpp"

#include "util/options.hpp"

#include <unistd.h>

#include <cerrno>
#include <vector>

namespace gpumemprof::core {

std::string report_stem(const std::string& pattern, bool pid_in_pattern, bool forked_child) {
    std::string prefix = util::expand_output_prefix(pattern, static_cast<int>(::getpid()));
    // "dir/" names a directory: files inside it, not hidden ".json" files.
    if (!prefix.empty() && prefix.back() == '/')
        prefix += "gpumemprof-" + std::to_string(::getpid());
    // A fork child's files carry its pid even if the pattern does not: they must not replace
    // the parent's.
    else if (forked_child && !pid_in_pattern)
        prefix += "." + std::to_string(::getpid());
    return prefix;
}

std::string anchored_pattern(const std::string& pattern) {
    if (pattern.empty() || pattern[0] == '/')
        return pattern;
    std::vector<char> cwd(4096);
    while (::getcwd(cwd.data(), cwd.size()) == nullptr) {
        if (errno != ERANGE || cwd.size() > (1u << 20))
            return pattern;
        cwd.resize(cwd.size() * 2);
    }
    std::string out;
    for (const char* c = cwd.data(); *c; ++c) {
        out.push_back(*c);
        if (*c == '%')
            out.push_back('%');
    }
    if (out.back() != '/')
        out.push_back('/');
    return out + pattern;
}

} // namespace gpumemprof::core
