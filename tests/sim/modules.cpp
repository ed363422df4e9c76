// SPDX-License-Identifier: MIT
// Simulated driver: modules, libraries, kernel launches, graph executables and context limits,
// and the device memory the real driver takes for them without any allocation call: a module's
// code (at load when CUDA_MODULE_LOADING=EAGER, else at its first function lookup), a function's
// code at its first launch, the context's local memory grown to the largest a launched function
// needs, each graph executable, and the malloc heap, printf FIFO and stack limits. Sizes come
// from the image (sim_module_image.hpp). Launches run nothing. Each stream takes
// SIMCUDA_STREAM_BYTES (default 0) while it lives, as a real driver takes its queue's memory, and
// each context the program creates SIMCUDA_CONTEXT_BYTES (default 0), as a real one takes its own.
// A graph executable's first launch or upload maps SIMCUDA_GRAPH_MEM_BYTES (default 0) of graph
// memory (its memory nodes' pool) on its device, which stays after the executable's destroy until
// cuDeviceGraphMemTrim when no executable of the device is left (the real pool's cache).
#include "sim_driver.hpp"
#include "sim_module_image.hpp"

#include <cstdlib>
#include <cstring>
#include <set>

struct CUfunc_st;
struct CUmod_st {
    CUctx_st* ctx = nullptr;
    gpumemprof::sim::SimModuleImage image;
    bool code_charged = false;
    bool alive = true;
    std::map<std::string, CUfunc_st*> functions;
};
struct CUfunc_st {
    CUmod_st* module = nullptr;
    bool launched = false;
};
struct CUkern_st;
struct CUlib_st {
    gpumemprof::sim::SimModuleImage image;
    bool alive = true;
    std::map<CUctx_st*, CUmod_st*> modules; // the library loaded into each context that used it
    std::map<std::string, CUkern_st*> kernels;
};
struct CUkern_st {
    CUlib_st* library = nullptr;
    std::string name;
};
struct CUgraphExec_st {
    CUctx_st* ctx = nullptr;
    bool alive = true;
    bool launched = false; ///< its first launch or upload mapped the device's graph memory
};

namespace gpumemprof::sim {
namespace {

// Everything below is guarded by state().mu. Handles are never freed (a stale handle is
// answered CUDA_ERROR_INVALID_HANDLE, not a use after free).
struct Modules {
    std::set<const void*> modules, functions, libraries, kernels, execs;
    // device memory the driver took, by what took it
    std::map<const void*, std::pair<int, std::size_t>> charges; // owner -> (device, bytes)
    std::map<CUctx_st*, std::size_t> local_bytes;
    std::map<std::pair<CUctx_st*, int>, std::size_t> limits;
    std::map<const void*, CUctx_st*> streams; ///< streams charged SIMCUDA_STREAM_BYTES, by context
    std::map<int, std::size_t> graph_memory;  ///< per device: what graphs' memory nodes keep mapped
};
Modules& modules() {
    static Modules* m = new Modules; // never destroyed, like State
    return *m;
}

bool eager_loading() {
    const char* v = std::getenv("CUDA_MODULE_LOADING");
    return v && std::strcmp(v, "EAGER") == 0;
}

SimModuleImage read_image(const void* image) {
    SimModuleImage out;
    const SimModuleImage want;
    if (image && std::memcmp(image, want.magic, sizeof want.magic) == 0)
        std::memcpy(&out, image, sizeof out);
    else
        out.module_bytes = kDefaultModuleBytes;
    return out;
}

/// The driver takes `bytes` more for `owner` on `ctx`'s device (capacity permitting).
CUresult charge_locked(State& st, CUctx_st* ctx, const void* owner, std::size_t bytes) {
    const int dev = ctx->device;
    if (bytes > st.capacity - st.used[dev])
        return CUDA_ERROR_OUT_OF_MEMORY;
    st.used[dev] += bytes;
    if (st.used[dev] > st.peak[dev])
        st.peak[dev] = st.used[dev];
    auto& c = modules().charges[owner];
    c.first = dev;
    c.second += bytes;
    return CUDA_SUCCESS;
}

void release_charge_locked(State& st, const void* owner) {
    auto& charges = modules().charges;
    if (auto it = charges.find(owner); it != charges.end()) {
        st.used[it->second.first] -= it->second.second;
        charges.erase(it);
    }
}

CUresult load_code_locked(State& st, CUmod_st* m) {
    if (m->code_charged)
        return CUDA_SUCCESS;
    if (CUresult r = charge_locked(st, m->ctx, m, m->image.module_bytes))
        return r;
    m->code_charged = true;
    return CUDA_SUCCESS;
}

CUresult load_module(CUmodule* out, const void* image) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    auto* m = new CUmod_st;
    m->ctx = ctx;
    m->image = read_image(image);
    if (eager_loading())
        if (CUresult r = load_code_locked(st, m)) {
            delete m;
            return r;
        }
    modules().modules.insert(m);
    *out = m;
    return CUDA_SUCCESS;
}

void unload_module_locked(State& st, CUmod_st* m) {
    m->alive = false;
    release_charge_locked(st, m);
    for (auto& [name, f] : m->functions)
        release_charge_locked(st, f);
}

CUresult unload_module(CUmodule h) {
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().modules.count(h) || !h->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    unload_module_locked(st, h);
    return CUDA_SUCCESS;
}

CUresult function_of_locked(State& st, CUmod_st* m, const char* name, CUfunction* out) {
    if (!m->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    if (CUresult r = load_code_locked(st, m)) // lazy loading: the module at its first lookup
        return r;
    CUfunc_st*& f = m->functions[name];
    if (!f) {
        f = new CUfunc_st;
        f->module = m;
        modules().functions.insert(f);
    }
    *out = f;
    return CUDA_SUCCESS;
}

CUresult get_function(CUfunction* out, CUmodule h, const char* name) {
    if (CUresult r = check_init())
        return r;
    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().modules.count(h))
        return CUDA_ERROR_INVALID_HANDLE;
    return function_of_locked(st, h, name, out);
}

/// A library's module in `ctx`, loaded there at its first use.
CUresult library_module_locked(State& st, CUlib_st* lib, CUctx_st* ctx, CUmod_st** out) {
    if (!lib->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    CUmod_st*& m = lib->modules[ctx];
    if (!m) {
        m = new CUmod_st;
        m->ctx = ctx;
        m->image = lib->image;
        modules().modules.insert(m);
    }
    if (CUresult r = load_code_locked(st, m))
        return r;
    *out = m;
    return CUDA_SUCCESS;
}

CUresult load_library(CUlibrary* out, const void* code) {
    if (CUresult r = check_init())
        return r;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    auto* lib = new CUlib_st;
    lib->image = read_image(code);
    modules().libraries.insert(lib);
    CUctx_st* ctx = current_ctx();
    CUmod_st* m = nullptr;
    if (eager_loading() && ctx && ctx->alive)
        if (CUresult r = library_module_locked(st, lib, ctx, &m))
            return r;
    *out = lib;
    return CUDA_SUCCESS;
}

CUresult unload_library(CUlibrary library) {
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().libraries.count(library) || !library->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    library->alive = false;
    for (auto& [ctx, m] : library->modules)
        if (m->alive)
            unload_module_locked(st, m);
    return CUDA_SUCCESS;
}

CUresult get_kernel(CUkernel* kernel, CUlibrary library, const char* name) {
    if (CUresult r = check_init())
        return r;
    if (!kernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().libraries.count(library) || !library->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    CUkern_st*& k = library->kernels[name];
    if (!k) {
        k = new CUkern_st;
        k->library = library;
        k->name = name;
        modules().kernels.insert(k);
    }
    *kernel = k;
    return CUDA_SUCCESS;
}

CUresult get_library_module(CUmodule* module, CUlibrary library) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!module)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().libraries.count(library))
        return CUDA_ERROR_INVALID_HANDLE;
    return library_module_locked(st, library, ctx, module);
}

CUresult kernel_function(CUfunction* f, CUkernel kernel) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!f)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().kernels.count(kernel))
        return CUDA_ERROR_INVALID_HANDLE;
    CUmod_st* m = nullptr;
    if (CUresult r = library_module_locked(st, kernel->library, ctx, &m))
        return r;
    return function_of_locked(st, m, kernel->name.c_str(), f);
}

/// The function a launch runs: `f` itself, or a library kernel's function in `ctx`.
CUresult launched_function_locked(State& st, CUfunction f, CUctx_st* ctx, CUfunc_st** out) {
    Modules& ms = modules();
    if (ms.functions.count(f)) {
        *out = f;
        return f->module->alive ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    }
    auto* k = reinterpret_cast<CUkern_st*>(f);
    if (!ms.kernels.count(k))
        return CUDA_ERROR_INVALID_HANDLE;
    CUmod_st* m = nullptr;
    if (CUresult r = library_module_locked(st, k->library, ctx, &m))
        return r;
    return function_of_locked(st, m, k->name.c_str(), out);
}

CUresult launch(CUfunction f) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    CUfunc_st* fn = nullptr;
    if (CUresult r = launched_function_locked(st, f, ctx, &fn))
        return r;
    if (!fn->launched) {
        if (CUresult r = charge_locked(st, ctx, fn, fn->module->image.function_bytes))
            return r;
        fn->launched = true;
    }
    std::size_t& local = modules().local_bytes[ctx];
    if (fn->module->image.local_bytes > local) {
        const std::size_t grow = fn->module->image.local_bytes - local;
        if (CUresult r = charge_locked(st, ctx, &local, grow))
            return r;
        local = fn->module->image.local_bytes;
    }
    return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* out, CUgraph graph) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    if (!out || !graph)
        return CUDA_ERROR_INVALID_VALUE;
    State& st = state();
    std::lock_guard lk(st.mu);
    auto* g = new CUgraphExec_st;
    g->ctx = ctx;
    if (CUresult r = charge_locked(st, ctx, g, kGraphExecBytes)) {
        delete g;
        return r;
    }
    modules().execs.insert(g);
    *out = g;
    return CUDA_SUCCESS;
}

/// A size from the environment (0 when unset), read once by each caller's static.
std::size_t env_bytes(const char* name) {
    const char* v = std::getenv(name);
    return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 0)) : 0;
}

std::size_t graph_memory_bytes() {
    static const std::size_t bytes = env_bytes("SIMCUDA_GRAPH_MEM_BYTES");
    return bytes;
}

CUresult exec_launch(CUgraphExec g) {
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().execs.count(g) || !g->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!g->launched) {
        std::size_t& mapped = modules().graph_memory[g->ctx->device];
        if (graph_memory_bytes() > mapped) {
            if (CUresult r = charge_locked(st, g->ctx, &mapped, graph_memory_bytes() - mapped))
                return r;
            mapped = graph_memory_bytes();
        }
        g->launched = true;
    }
    return CUDA_SUCCESS;
}

CUresult graph_memory_trim(CUdevice device) {
    if (CUresult r = check_init())
        return r;
    State& st = state();
    if (device < 0 || device >= st.device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    std::lock_guard lk(st.mu);
    for (const void* h : modules().execs) {
        const auto* g = static_cast<const CUgraphExec_st*>(h);
        if (g->alive && g->ctx->device == device)
            return CUDA_SUCCESS; // in use by an executable: kept
    }
    std::size_t& mapped = modules().graph_memory[device];
    release_charge_locked(st, &mapped);
    mapped = 0;
    return CUDA_SUCCESS;
}

CUresult exec_destroy(CUgraphExec g) {
    if (CUresult r = check_init())
        return r;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (!modules().execs.count(g) || !g->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    g->alive = false;
    release_charge_locked(st, g);
    return CUDA_SUCCESS;
}

CUresult set_limit(CUlimit limit, std::size_t value) {
    CUctx_st* ctx = nullptr;
    if (CUresult r = require_ctx(&ctx))
        return r;
    std::size_t bytes = 0;
    switch (limit) {
    case CU_LIMIT_MALLOC_HEAP_SIZE:
    case CU_LIMIT_PRINTF_FIFO_SIZE: bytes = value; break;
    case CU_LIMIT_STACK_SIZE: bytes = value * kResidentThreads; break;
    default: return CUDA_SUCCESS; // the other limits take no memory here
    }
    State& st = state();
    std::lock_guard lk(st.mu);
    std::size_t& held = modules().limits[{ctx, static_cast<int>(limit)}];
    const void* owner = &held;
    if (bytes > held) {
        if (CUresult r = charge_locked(st, ctx, owner, bytes - held))
            return r;
    } else {
        auto& c = modules().charges[owner];
        st.used[ctx->device] -= held - bytes;
        c.second -= held - bytes;
    }
    held = bytes;
    return CUDA_SUCCESS;
}

std::size_t stream_bytes() {
    static const std::size_t bytes = env_bytes("SIMCUDA_STREAM_BYTES");
    return bytes;
}

std::size_t context_bytes() {
    static const std::size_t bytes = env_bytes("SIMCUDA_CONTEXT_BYTES");
    return bytes;
}

} // namespace

CUresult charge_context(CUctx_st* ctx) {
    if (context_bytes() == 0)
        return CUDA_SUCCESS;
    State& st = state();
    std::lock_guard lk(st.mu);
    return charge_locked(st, ctx, ctx, context_bytes());
}

CUresult charge_stream(CUctx_st* ctx, const void* stream) {
    if (stream_bytes() == 0)
        return CUDA_SUCCESS;
    State& st = state();
    std::lock_guard lk(st.mu);
    if (CUresult r = charge_locked(st, ctx, stream, stream_bytes()))
        return r;
    modules().streams[stream] = ctx;
    return CUDA_SUCCESS;
}

void release_stream(const void* stream) {
    State& st = state();
    std::lock_guard lk(st.mu);
    release_charge_locked(st, stream);
    modules().streams.erase(stream);
}

void drop_context_modules(CUctx_st* ctx) {
    State& st = state();
    std::lock_guard lk(st.mu);
    release_charge_locked(st, ctx); // a created context's own memory (charge_context)
    Modules& ms = modules();
    for (auto it = ms.streams.begin(); it != ms.streams.end();) {
        if (it->second == ctx) {
            release_charge_locked(st, it->first);
            it = ms.streams.erase(it);
        } else {
            ++it;
        }
    }
    for (const void* h : ms.modules) {
        auto* m = const_cast<CUmod_st*>(static_cast<const CUmod_st*>(h));
        if (m->ctx == ctx && m->alive)
            unload_module_locked(st, m);
    }
    for (const void* h : ms.execs) {
        auto* g = const_cast<CUgraphExec_st*>(static_cast<const CUgraphExec_st*>(h));
        if (g->ctx == ctx && g->alive) {
            g->alive = false;
            release_charge_locked(st, g);
        }
    }
    if (auto it = ms.local_bytes.find(ctx); it != ms.local_bytes.end()) {
        release_charge_locked(st, &it->second);
        it->second = 0;
    }
    for (auto& [key, held] : ms.limits)
        if (key.first == ctx) {
            release_charge_locked(st, &held);
            held = 0;
        }
}

} // namespace gpumemprof::sim

using namespace gpumemprof::sim;

SIM_EXPORT CUresult cuModuleLoad(CUmodule* module, const char*) {
    SIM_COUNTED("cuModuleLoad", load_module(module, nullptr));
}
SIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
    SIM_COUNTED("cuModuleLoadData", load_module(module, image));
}
SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, CUjit_option*, void**) {
    SIM_COUNTED("cuModuleLoadDataEx", load_module(module, image));
}
SIM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* image) {
    SIM_COUNTED("cuModuleLoadFatBinary", load_module(module, image));
}
SIM_EXPORT CUresult cuModuleUnload(CUmodule module) {
    SIM_COUNTED("cuModuleUnload", unload_module(module));
}
SIM_EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
    SIM_COUNTED("cuModuleGetFunction", get_function(f, module, name));
}
SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned int,
                                      CUlibraryOption*, void**, unsigned int) {
    SIM_COUNTED("cuLibraryLoadData", load_library(library, code));
}
SIM_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* library, const char*, CUjit_option*, void**, unsigned int,
                                          CUlibraryOption*, void**, unsigned int) {
    SIM_COUNTED("cuLibraryLoadFromFile", load_library(library, nullptr));
}
SIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
    SIM_COUNTED("cuLibraryUnload", unload_library(library));
}
SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
    SIM_COUNTED("cuLibraryGetKernel", get_kernel(kernel, library, name));
}
SIM_EXPORT CUresult cuLibraryGetModule(CUmodule* module, CUlibrary library) {
    SIM_COUNTED("cuLibraryGetModule", get_library_module(module, library));
}
SIM_EXPORT CUresult cuKernelGetFunction(CUfunction* f, CUkernel kernel) {
    SIM_COUNTED("cuKernelGetFunction", kernel_function(f, kernel));
}
SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, CUstream, void**, void**) {
    SIM_COUNTED("cuLaunchKernel", launch(f));
}
SIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int,
                                        unsigned int, unsigned int, unsigned int, CUstream, void**, void**) {
    SIM_COUNTED("cuLaunchKernel_ptsz", launch(f));
}
SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction f, void**, void**) {
    SIM_COUNTED("cuLaunchKernelEx", launch(f));
}
SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction f, void**, void**) {
    SIM_COUNTED("cuLaunchKernelEx_ptsz", launch(f));
}
SIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int,
                                              unsigned int, unsigned int, unsigned int, CUstream, void**) {
    SIM_COUNTED("cuLaunchCooperativeKernel", launch(f));
}
SIM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int, unsigned int, unsigned int, unsigned int,
                                                   unsigned int, unsigned int, unsigned int, CUstream, void**) {
    SIM_COUNTED("cuLaunchCooperativeKernel_ptsz", launch(f));
}
SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
    SIM_COUNTED("cuGraphInstantiateWithFlags", instantiate(exec, graph));
}
SIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS*) {
    SIM_COUNTED("cuGraphInstantiateWithParams", instantiate(exec, graph));
}
SIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS*) {
    SIM_COUNTED("cuGraphInstantiateWithParams_ptsz", instantiate(exec, graph));
}
SIM_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream) {
    SIM_COUNTED("cuGraphUpload", exec_launch(exec));
}
SIM_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream) {
    SIM_COUNTED("cuGraphUpload_ptsz", exec_launch(exec));
}
SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream) {
    SIM_COUNTED("cuGraphLaunch", exec_launch(exec));
}
SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream) {
    SIM_COUNTED("cuGraphLaunch_ptsz", exec_launch(exec));
}
SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
    SIM_COUNTED("cuGraphExecDestroy", exec_destroy(exec));
}
SIM_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
    SIM_COUNTED("cuDeviceGraphMemTrim", graph_memory_trim(device));
}
SIM_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
    SIM_COUNTED("cuCtxSetLimit", set_limit(limit, value));
}
