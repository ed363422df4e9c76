// SPDX-License-Identifier: MIT
#include "report/owner.hpp"

#include <cstring>

namespace gpumemprof::report {
namespace {

struct Known {
    const char* prefix; ///< start of the module's file name
    const char* name;
};

// Longer prefixes first where one starts another (libcublasLt before libcublas).
constexpr Known kLibraries[] = {
    {"libcublasLt", "cuBLASLt"},
    {"libcublas", "cuBLAS"},
    {"libcudnn", "cuDNN"},
    {"libnccl", "NCCL"},
    {"libcufft", "cuFFT"},
    {"libcurand", "cuRAND"},
    {"libcusparse", "cuSPARSE"},
    {"libcusolver", "cuSOLVER"},
    {"libnvrtc", "NVRTC"},
    {"libnvJitLink", "nvJitLink"},
    {"libcupti", "CUPTI"},
    {"libnvshmem", "NVSHMEM"},
    {"libc10_cuda", "PyTorch"},
    // PyTorch's own code outside its caching allocator: its pinned host buffers
    // (CachingHostAllocator, for .item() and non_blocking copies), kept for reuse as the
    // allocator keeps device blocks.
    {"libtorch_cuda", "PyTorch (libtorch_cuda)"},
    {"xla_extension", "JAX (XLA)"},
    {"libjax", "JAX (XLA)"},
    {"libxla", "JAX (XLA)"},
    {"xla_cuda_plugin", "JAX (XLA)"},
    {"libtensorflow", "TensorFlow"},
};

} // namespace

std::string library_of_module(const std::string& module) {
    for (const Known& k : kLibraries)
        if (module.compare(0, std::strlen(k.prefix), k.prefix) == 0)
            return k.name;
    return {};
}

std::string owning_library(const std::vector<SymbolFrame>& frames) {
    if (frames.empty())
        return {};
    const SymbolFrame& innermost = frames.back();
    return innermost.python ? std::string() : library_of_module(innermost.module);
}

std::string owning_library(const ResolvedReport& r, std::uint32_t stack) {
    if (stack == 0)
        return {};
    const SymbolFrame& innermost = r.frames[r.stacks.frame(stack)];
    return innermost.python ? std::string() : library_of_module(innermost.module);
}

} // namespace gpumemprof::report
