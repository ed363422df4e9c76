// SPDX-License-Identifier: MIT
// Which frames are the user's own code: the reports lead each call site with its innermost such
// frame (train.py:57 in forward, not at::native::log_softmax) and group sites by it. The user's
// code is what is not the Python standard library, an installed package (site-packages,
// dist-packages), code generated for the program (torch.compile's Inductor modules, torch.fx's
// <eval_with_key>), the interpreter, or a shared library: for a native program, the
// executable's own code. GPUMEMPROF_USER_CODE (comma-separated globs, matched against a frame's file and, for
// native frames, its module) says it instead.
#pragma once

#include "report/resolved_stacks.hpp"
#include "report/symbolizer.hpp"

#include <string>
#include <vector>

namespace gpumemprof::report {

class UserCode {
public:
    /// `exe`: the program's executable (its module's file name is the native user's code);
    /// `globs`: GPUMEMPROF_USER_CODE ("" = the default rule above).
    UserCode(const std::string& exe, const std::string& globs);

    bool is_user(const SymbolFrame& f) const;
    /// Index (into `frames`, root first) of the innermost user frame, or -1.
    int innermost_user(const std::vector<SymbolFrame>& frames) const;
    /// The same for stack node `stack` of a resolved report: the innermost user frame's index
    /// into r.frames plus one, or 0 when the stack has none.
    std::uint32_t innermost_user(const ResolvedReport& r, std::uint32_t stack) const;
    /// "train.py:57:forward" of that frame (its file's base name), or "" when there is none.
    std::string user_line(const std::vector<SymbolFrame>& frames) const;

private:
    std::string exe_module_;
    std::vector<std::string> globs_;
};

} // namespace gpumemprof::report
