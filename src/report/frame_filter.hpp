// SPDX-License-Identifier: MIT
// Which frames the people-facing stack listings leave out: allocation and dispatch plumbing
// between the allocator and the code that asked for memory. A PyTorch stack starts with about
// a dozen such frames (the caching allocator, at::empty*, the dispatcher's wrappers), which
// would fill the six lines a call site gets in the .txt before any operator appears.
// Display only: the line-profile tree, the folded files and the JSON keep every frame.
#pragma once

#include "report/symbolizer.hpp"

#include <string>
#include <unordered_map>
#include <vector>

namespace gpumemprof::report {

/// GPUMEMPROF_HIDE_FRAMES when unset: glob patterns (fnmatch), each matched against a frame's
/// demangled function name and against its module's file name.
inline constexpr const char* kDefaultHiddenFrames =
    "c10::cuda::CUDACachingAllocator::*,"                                          // PyTorch's allocator front end
    "at::detail::empty*,at::empty*,at::native::empty_*,"                           // tensor creation helpers
    "at::*::create_out*,*::set_output_raw_strided*,at::meta::structured_*::meta*," // structured outputs
    "at::TensorIteratorBase::*,at::TensorIterator::*," // output allocation of elementwise operators
    "at::*wrapper_*,"                                  // generated dispatcher entry points per backend
    "c10::impl::*,c10::Dispatcher::*,c10::KernelFunction::*,c10::BoxedKernel::*,at::_ops::*," // dispatch
    "torch::autograd::VariableType::*,at::autocast::WrapFunction_*," // autograd and autocast wrappers
    "std::_Function_handler*,std::function*,std::__invoke*,"         // std::function trampolines
    "python3*,libpython3*," // the interpreter (its Python frames are shown instead)
    "libffi.so*,_ctypes.*," // ctypes' foreign-call machinery
    "__libc_start_main*,__libc_start_call_main,_start,clone,clone3,start_thread"; // libc/loader start-up

class FrameFilter {
public:
    /// `spec`: comma-separated patterns; nullptr = kDefaultHiddenFrames; "" or "none" = hide
    /// nothing.
    explicit FrameFilter(const char* spec);
    /// A frame whose function name or module name matches a pattern. Each (module, function)
    /// pair is matched once: a report asks about the same frames over and over.
    bool hidden(const SymbolFrame& f) const;
    const std::vector<std::string>& patterns() const { return patterns_; }

private:
    bool matches(const SymbolFrame& f) const;

    std::vector<std::string> patterns_;
    mutable std::unordered_map<std::string, bool> decided_; ///< key: module '\0' function
};

} // namespace gpumemprof::report
