// SPDX-License-Identifier: MIT
#include "report/owner.hpp"

#include <cstring>
#include <string_view>

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

/// MemoryKind::library's name (core::memory_kind_name), as DeviceSummary::SiteKind carries it.
constexpr std::string_view kLibraryKind = "library workspaces";

/// The library whose workspace PyTorch allocated for one of its handles, by the getter's name
/// (getCurrentCUDABlasHandle, getCUDABlasLtWorkspace, getCudnnHandle...), innermost first; ""
/// when no frame is such a getter.
std::string workspace_owner(const ResolvedReport& r, std::uint32_t stack) {
    struct Part {
        const char* in_name;
        const char* library;
    };
    // Longer first where one contains another (BlasLt before Blas).
    constexpr Part kParts[] = {{"BlasLt", "cuBLASLt"}, {"Blas", "cuBLAS"}, {"blas", "cuBLAS"},
                               {"udnn", "cuDNN"},      {"ccl", "NCCL"},    {"olver", "cuSOLVER"},
                               {"parse", "cuSPARSE"},  {"ufft", "cuFFT"},  {"FFT", "cuFFT"}};
    for (std::uint32_t n = stack; n != 0; n = r.stacks.parent(n)) {
        const SymbolFrame& f = r.frames[r.stacks.frame(n)];
        if (f.python ||
            (f.function.find("orkspace") == std::string::npos && f.function.find("Handle") == std::string::npos))
            continue;
        for (const Part& p : kParts)
            if (f.function.find(p.in_name) != std::string::npos)
                return std::string(p.library) + " (its workspace, from PyTorch's allocator)";
    }
    return {};
}

} // namespace

std::vector<std::string> site_owners(const ReportInput& in, const ResolvedReport& r,
                                     const std::vector<const DeviceSummary::SiteKind*>& kind) {
    const bool tensors = in.torch_attached() || in.torch_uncached; // what PyTorch's allocator code allocates
    std::vector<std::string> out(r.sites.size());
    for (std::size_t i = 0; i < r.sites.size(); ++i) {
        if (kind[i]) { // any kind but a library's: a tensor of the program
            if (kind[i]->kind == kLibraryKind) {
                out[i] = workspace_owner(r, r.sites[i].stack);
                if (out[i].empty())
                    out[i] = "a library (its workspace, from PyTorch's allocator)";
            }
            continue;
        }
        out[i] = owning_library(r, r.sites[i].stack);
        if (tensors && out[i] == "PyTorch") // no kinds (caching off): told by the frames alone
            out[i] = workspace_owner(r, r.sites[i].stack);
    }
    return out;
}

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
