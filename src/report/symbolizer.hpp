// SPDX-License-Identifier: MIT
// Report-time symbolisation of code addresses: module + offset, demangled function, file:line
// and inlined frames from DWARF (elfutils libdwfl). Never used on the hot path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpumemprof::report {

/// One source-level frame. An address inside inlined code yields several, innermost first.
struct SymbolFrame {
    std::string function;      ///< demangled; empty when unknown
    std::string file;          ///< source path (normalised); empty without debug info
    int line = 0;              ///< 0 when unknown
    std::string module;        ///< file name of the ELF object (no directory), "??" when unknown
    std::uintptr_t offset = 0; ///< address minus the module's load address
    bool python = false;       ///< a Python frame (file, line, qualified name from the code object)
};

/// Injectable so that report formatting can be tested with made-up names.
class Symbolizer {
public:
    virtual ~Symbolizer() = default;
    /// Never empty: at least one frame, innermost (most deeply inlined) first. The reference stays
    /// valid as long as the symbolizer lives.
    virtual const std::vector<SymbolFrame>& resolve(std::uintptr_t ip) = 0;
    /// The module (file name) holding `ip`, as resolve() would name it, ideally without reading
    /// debug info: the reports drop the leading frames of some modules (the profiler's own,
    /// CUDA's) and need not look those up. "" when unknown.
    virtual std::string module_of(std::uintptr_t ip) { return resolve(ip).front().module; }
};

/// Resolves addresses of the running process; each address once (results cached). Modules
/// loaded after construction are picked up on the first miss. Not thread-safe.
class ProcessSymbolizer final : public Symbolizer {
public:
    ProcessSymbolizer();
    ~ProcessSymbolizer() override;
    const std::vector<SymbolFrame>& resolve(std::uintptr_t ip) override;
    /// dladdr's module (no DWARF); "" for code unloaded by dlclose or not in any module.
    std::string module_of(std::uintptr_t ip) override;
    std::size_t resolved_count() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// abi::__cxa_demangle, or the name unchanged when it is not a mangled C++ name.
std::string demangle(const char* name);

/// Frame label `file:line:function` (CuPy's), or `module+0xoffset[:function]` without a file, or
/// just the function for a frame that names neither file nor module (`[autograd backward]`).
std::string frame_label(const SymbolFrame& f);

} // namespace gpumemprof::report
