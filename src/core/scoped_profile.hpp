// SPDX-License-Identifier: MIT
// Line profiles of a scope (the Python package's LineProfile context manager, through the C API):
// live state of the process, the call sites' cumulative totals at each open scope's start and
// end; the tree of the differences (report/line_profile) shows only what was allocated inside
// the scope, in CuPy's LineProfileHook format.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace gpumemprof::core {

class ScopedProfiles {
public:
    static ScopedProfiles& instance();

    /// Starts a scope; returns its token (> 0), or 0 on failure.
    std::int64_t begin() noexcept;
    /// Ends a scope (its totals are frozen); false for an unknown or already ended token.
    bool end(std::int64_t token) noexcept;
    /// The tree of an ended scope: `_root (used, acquired)` then `file:line:function (used,
    /// acquired)` lines. max_depth > 0 keeps that many innermost frames per stack; `native`
    /// false keeps only the Python frames of stacks that have some. Empty for an unknown token.
    std::string render(std::int64_t token, int max_depth, bool native, const char* stack_skip, int python_mode);
    void release(std::int64_t token) noexcept;

private:
    /// Per stack id: (bytes handed out, bytes acquired from the driver), cumulative.
    using Totals = std::map<std::uint32_t, std::pair<std::int64_t, std::int64_t>>;
    struct Scope {
        Totals start, stop;
        bool ended = false;
    };
    static Totals totals_now();

    std::mutex mutex_;
    std::map<std::int64_t, Scope> scopes_;
    std::int64_t next_ = 1;
};

} // namespace gpumemprof::core
