// SPDX-License-Identifier: MIT
// Who owns an allocation: the library whose code asked for it (cuBLAS's workspaces, NCCL's
// buffers, JAX's arena, PyTorch's caching allocator), or the program itself. Told by the
// innermost frame of its call stack (the profiler's and the CUDA runtime's own frames are
// already dropped from the top).
#pragma once

#include "report/report_input.hpp"
#include "report/resolved_stacks.hpp"
#include "report/symbolizer.hpp"

#include <string>
#include <vector>

namespace gpumemprof::report {

/// The owning library's name ("cuBLAS", "NCCL", "PyTorch", ...), or "" for the program.
/// `frames`: root (outermost) first, as ResolvedSite keeps them.
std::string owning_library(const std::vector<SymbolFrame>& frames);

/// The same for stack `stack` of a resolved report (StackTree node of its innermost frame).
std::string owning_library(const ResolvedReport& r, std::uint32_t stack);

/// Who keeps each site's blocks (r.sites' order), as the leak lists say it: "" for the program.
/// PyTorch's allocator code allocates two things. Its cached segments are its own memory. A
/// tensor is the program's, unless it is a library's workspace a handle getter allocated
/// (cuBLAS, cuDNN): so when the profiler is attached to the allocator (each block is a tensor,
/// with a kind of memory) or its caching is off (each cudaMalloc is a tensor), a block under
/// its code is the program's, or the workspace's library's.
/// `kinds`: site_kinds(in, r), which each writer has already.
std::vector<std::string> site_owners(const ReportInput& in, const ResolvedReport& r,
                                     const std::vector<const DeviceSummary::SiteKind*>& kinds);

/// The library a module file name belongs to ("libcublasLt.so.13" -> "cuBLASLt"), or "".
std::string library_of_module(const std::string& module);

} // namespace gpumemprof::report
