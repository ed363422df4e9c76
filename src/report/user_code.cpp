// SPDX-License-Identifier: MIT
#include "report/user_code.hpp"

#include "util/path.hpp"

#include <fnmatch.h>

namespace gpumemprof::report {
namespace {

bool contains(const std::string& s, const char* part) {
    return s.find(part) != std::string::npos;
}

/// A module torch.compile's Inductor wrote for a compiled graph: <cache>/xy/c<51 base32
/// characters>.py, xy the name's 2nd and 3rd characters (codecache's code_hash and write), the
/// cache /tmp/torchinductor_<user> unless TORCHINDUCTOR_CACHE_DIR moves it. The line of the
/// user's own that ran the graph is further out.
bool inductor_module(const std::string& file) {
    if (contains(file, "/torchinductor_"))
        return true;
    const std::size_t slash = file.rfind('/');
    if (slash == std::string::npos || slash < 3 || file.size() - slash - 1 != 1 + 51 + 3)
        return false;
    const std::string name = file.substr(slash + 1);
    if (name[0] != 'c' || name.compare(52, 3, ".py") != 0 || file[slash - 3] != '/' ||
        file.compare(slash - 2, 2, name, 1, 2) != 0)
        return false;
    for (std::size_t i = 1; i < 52; ++i)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '2' && name[i] <= '7')))
            return false;
    return true;
}

/// The standard library and the interpreter's own: .../lib/pythonX.Y/... outside site-packages,
/// and frozen or generated code.
bool python_library(const std::string& file) {
    if (contains(file, "site-packages") || contains(file, "dist-packages"))
        return true;
    if (file.empty() || file[0] == '<')
        return true; // <frozen importlib._bootstrap>, <string>, <eval_with_key>.N (torch.fx)
    if (inductor_module(file))
        return true;
    const std::size_t lib = file.find("/lib/python3");
    return lib != std::string::npos;
}

} // namespace

UserCode::UserCode(const std::string& exe, const std::string& globs) : exe_module_(util::base_name(exe.c_str())) {
    std::string item;
    for (std::size_t i = 0; i <= globs.size(); ++i) {
        if (i == globs.size() || globs[i] == ',') {
            const std::size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
            if (a != std::string::npos)
                globs_.push_back(item.substr(a, b - a + 1));
            item.clear();
        } else {
            item += globs[i];
        }
    }
}

bool UserCode::is_user(const SymbolFrame& f) const {
    if (f.function.rfind("backward of ", 0) == 0)
        return false; // the autograd marker: its forward line follows
    if (!globs_.empty()) {
        for (const std::string& g : globs_)
            if ((!f.file.empty() && fnmatch(g.c_str(), f.file.c_str(), 0) == 0) ||
                (!f.python && fnmatch(g.c_str(), f.module.c_str(), 0) == 0))
                return true;
        return false;
    }
    if (f.python)
        return !python_library(f.file);
    // A native frame: the executable's own code (a Python program's executable is the
    // interpreter, whose frames are never the user's).
    return !exe_module_.empty() && f.module == exe_module_ && exe_module_.rfind("python", 0) != 0;
}

int UserCode::innermost_user(const std::vector<SymbolFrame>& frames) const {
    for (int i = static_cast<int>(frames.size()) - 1; i >= 0; --i)
        if (is_user(frames[static_cast<std::size_t>(i)]))
            return i;
    return -1;
}

std::uint32_t UserCode::innermost_user(const ResolvedReport& r, std::uint32_t stack) const {
    for (std::uint32_t n = stack; n != 0; n = r.stacks.parent(n))
        if (is_user(r.frames[r.stacks.frame(n)]))
            return r.stacks.frame(n) + 1;
    return 0;
}

std::string UserCode::user_line(const std::vector<SymbolFrame>& frames) const {
    const int i = innermost_user(frames);
    if (i < 0)
        return {};
    const SymbolFrame& f = frames[static_cast<std::size_t>(i)];
    return std::string(util::base_name(f.file.empty() ? f.module.c_str() : f.file.c_str())) + ":" +
           std::to_string(f.line) + ":" + f.function;
}

} // namespace gpumemprof::report
