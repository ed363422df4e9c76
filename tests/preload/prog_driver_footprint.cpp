// SPDX-License-Identifier: MIT
// Device memory the driver takes for itself, with no allocation call: modules, kernels loaded
// lazily at their first lookup or launch, the local memory grown for them, CUDA graph executables
// and the malloc-heap limit, and a kernel first launched in a stream capture. The simulated driver charges what
// sim_module_image.hpp says; the case checks that the accounting names every byte (cases_pool.py,
// case_driver_footprint). With argument "context": a context the program creates, used and
// destroyed beside the primary one (case_driver_footprint_context); "graph_memory": a graph's
// memory nodes, kept after its executable goes until a trim (case_driver_footprint_graph_memory);
// "async_pool": freed stream-ordered memory a pool keeps reserved (case_driver_footprint_async_pool);
// "race": a kernel's first launch, and another thread's launch of it that does the load while
// the first is being measured (case_driver_footprint_race).
#include "common.hpp"

#include "../sim/sim_module_image.hpp"

#include <cuda.h>

#include <cstring>
#include <thread>

extern "C" long long simcuda_stat(const char* key);
extern "C" void simcuda_on_call(void (*hook)(const char* name));

using gpumemprof::sim::SimModuleImage;

namespace {
SimModuleImage image(unsigned long long module, unsigned long long function, unsigned long long local) {
    SimModuleImage i;
    i.module_bytes = module;
    i.function_bytes = function;
    i.local_bytes = local;
    return i;
}
void launch(CUfunction f, CUstream s = nullptr) {
    MUST(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
}
void used(const char* key) {
    put(key, simcuda_stat("bytes_in_use") / static_cast<long long>(kMiB));
}
/// Device 0's primary context current, and a block of 16 MiB in it (the device's baseline is read
/// before it).
CUdeviceptr primary_with_block(CUdevice* dev, CUcontext* primary) {
    MUST(cuInit(0));
    MUST(cuDeviceGet(dev, 0));
    MUST(cuDevicePrimaryCtxRetain(primary, *dev));
    MUST(cuCtxSetCurrent(*primary));
    CUdeviceptr d = 0;
    MUST(cuMemAlloc_v2(&d, 16 * kMiB));
    return d;
}

/// A stream of 2 MiB (SIMCUDA_STREAM_BYTES) in the primary context; a context of 8 MiB
/// (SIMCUDA_CONTEXT_BYTES) created beside it, a block allocated and freed in it, the context
/// destroyed; the stream stays.
int context_case() {
    CUdevice dev;
    CUcontext primary;
    const CUdeviceptr d = primary_with_block(&dev, &primary);
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUcontext own;
    MUST(cuCtxCreate_v2(&own, 0, dev)); // pushed: current from here
    CUdeviceptr e = 0;
    MUST(cuMemAlloc_v2(&e, 12 * kMiB));
    used("used_with_context_mib");
    MUST(cuMemFree_v2(e));
    MUST(cuCtxDestroy_v2(own)); // popped: the primary context is current again
    CUcontext current = nullptr;
    MUST(cuCtxGetCurrent(&current));
    put("primary_current_again", current == primary ? 1 : 0);
    used("used_after_destroy_mib");
    MUST(cuMemFree_v2(d));
    MUST(cuStreamSynchronize(s));
    used("used_at_exit_mib");
    return 0;
}
/// A graph whose first launch maps 32 MiB of graph memory (SIMCUDA_GRAPH_MEM_BYTES) besides its
/// executable's 2 MiB; the executable destroyed, the memory kept until cuDeviceGraphMemTrim.
int graph_memory_case() {
    CUdevice dev;
    CUcontext primary;
    const CUdeviceptr d = primary_with_block(&dev, &primary);
    const SimModuleImage none = image(0, 0, 0);
    CUmodule m;
    CUfunction f;
    MUST(cuModuleLoadData(&m, &none));
    MUST(cuModuleGetFunction(&f, m, "k"));
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch(f, s);
    CUgraph g;
    MUST(cuStreamEndCapture(s, &g));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    MUST(cuGraphLaunch(e, s));
    MUST(cuStreamSynchronize(s));
    used("used_launched_mib");
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    used("used_after_destroy_mib");
    MUST(cuDeviceGraphMemTrim(dev));
    used("used_after_trim_mib");
    MUST(cuMemFree_v2(d));
    MUST(cuStreamSynchronize(s));
    return 0;
}
} // namespace

/// Stream-ordered memory from the default pool with a release threshold of 64 MiB: 16 + 8 MiB
/// allocated and freed, then kept reserved by the pool until exit (as PyTorch's cudaMallocAsync
/// backend sets its pool's threshold); then 2000 blocks of 64 KiB from that reserve.
int async_pool_case() {
    CUdevice dev;
    CUcontext primary;
    const CUdeviceptr d = primary_with_block(&dev, &primary);
    CUmemoryPool pool;
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    cuuint64_t threshold = 64 * kMiB;
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CUdeviceptr a = 0, b = 0;
    MUST(cuMemAllocAsync(&a, 16 * kMiB, nullptr));
    MUST(cuMemAllocAsync(&b, 8 * kMiB, nullptr));
    used("used_live_mib");
    MUST(cuMemFreeAsync(a, nullptr));
    MUST(cuMemFreeAsync(b, nullptr));
    MUST(cuStreamSynchronize(nullptr));
    used("used_after_free_mib");
    // A framework's loop (CuPy's MemoryAsyncPool): small blocks from the pool's reserve, which
    // the driver's figure does not see move.
    for (int i = 0; i < 2000; ++i) {
        CUdeviceptr p = 0;
        MUST(cuMemAllocAsync(&p, 64 << 10, nullptr));
        MUST(cuMemFreeAsync(p, nullptr));
        MUST(cuStreamSynchronize(nullptr)); // the free done before the next block: the reserve never grows
    }
    used("used_after_small_mib");
    cuuint64_t reserved = 0;
    MUST(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    put("pool_reserved_mib", static_cast<long long>(reserved / kMiB));
    MUST(cuMemFree_v2(d));
    used("used_at_exit_mib");
    return 0;
}

namespace race {
CUcontext g_ctx = nullptr;
CUfunction g_f = nullptr;
thread_local bool t_armed = false;

void second_launch() {
    std::thread([] {
        MUST(cuCtxSetCurrent(g_ctx));
        launch(g_f);
    }).join();
}
/// The first thread's first driver call after its launch began (under the preload, inside the
/// profiler's hook, after it took the handle's first use and before it read the device): the
/// second thread's whole launch, in which the simulated driver loads the kernel.
void on_call(const char* name) {
    if (t_armed && std::strcmp(name, "cuLaunchKernel") != 0) {
        t_armed = false;
        second_launch();
    }
}
} // namespace race

/// A kernel of 8 MiB loaded at its first launch by whichever launch reaches the driver first.
int race_case() {
    CUdevice dev;
    const CUdeviceptr d = primary_with_block(&dev, &race::g_ctx);
    const SimModuleImage i = image(0, 8 * kMiB, 0);
    CUmodule m;
    MUST(cuModuleLoadData(&m, &i));
    MUST(cuModuleGetFunction(&race::g_f, m, "k"));
    simcuda_on_call(race::on_call);
    std::thread([] {
        MUST(cuCtxSetCurrent(race::g_ctx));
        race::t_armed = true;
        launch(race::g_f);
        put("second_inside_first", race::t_armed ? 0 : 1);
        if (race::t_armed) { // alone, the launch made no other call: the second one after it
            race::t_armed = false;
            race::second_launch();
        }
    }).join();
    simcuda_on_call(nullptr);
    used("used_launched_mib");
    MUST(cuMemFree_v2(d));
    used("used_at_exit_mib");
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "race") == 0)
        return race_case();
    if (argc > 1 && std::strcmp(argv[1], "graph_memory") == 0)
        return graph_memory_case();
    if (argc > 1 && std::strcmp(argv[1], "context") == 0)
        return context_case();
    if (argc > 1 && std::strcmp(argv[1], "async_pool") == 0)
        return async_pool_case();
    MUST(cuInit(0));
    CUdevice dev;
    MUST(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));

    // Before the first allocation: 4 MiB of module A's code (loaded at its first lookup).
    const SimModuleImage ia = image(4 * kMiB, 2 * kMiB, 8 * kMiB);
    CUmodule ma, mb;
    CUfunction fa, fb;
    MUST(cuModuleLoadData(&ma, &ia));
    MUST(cuModuleGetFunction(&fa, ma, "a"));
    used("used_before_first_alloc_mib");

    CUdeviceptr d = 0;
    MUST(cuMemAlloc_v2(&d, 16 * kMiB));
    // a's first launch: its code (2 MiB) and the context's local memory (8 MiB).
    launch(fa);
    launch(fa);
    // Module B: 6 MiB of code at b's lookup; its launch needs less local memory than a's.
    const SimModuleImage ib = image(6 * kMiB, 0, 4 * kMiB);
    MUST(cuModuleLoadData(&mb, &ib));
    MUST(cuModuleGetFunction(&fb, mb, "b"));
    launch(fb);
    // A library's kernel launched as a function: 2 MiB of module and 2 MiB of function code.
    const SimModuleImage il = image(2 * kMiB, 2 * kMiB, 0);
    CUlibrary lib;
    CUkernel k;
    MUST(cuLibraryLoadData(&lib, &il, nullptr, nullptr, 0, nullptr, nullptr, 0));
    MUST(cuLibraryGetKernel(&k, lib, "k"));
    launch(reinterpret_cast<CUfunction>(k));
    used("used_after_kernels_mib");

    // Module C's 2 MiB of code at c's lookup; c's first launch is in a stream capture: its 2 MiB
    // are taken there. Two graph executables of 2 MiB each; one is destroyed.
    const SimModuleImage ic = image(2 * kMiB, 2 * kMiB, 0);
    CUmodule mc;
    CUfunction fc;
    MUST(cuModuleLoadData(&mc, &ic));
    MUST(cuModuleGetFunction(&fc, mc, "c"));
    // Each stream takes 2 MiB of its own (SIMCUDA_STREAM_BYTES): s stays, t goes.
    CUstream s, t;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreateWithPriority(&t, CU_STREAM_NON_BLOCKING, -1));
    MUST(cuStreamDestroy_v2(t));
    MUST(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch(fa, s);
    launch(fc, s);
    CUgraph g;
    MUST(cuStreamEndCapture(s, &g));
    CUgraphExec e1, e2;
    MUST(cuGraphInstantiateWithFlags(&e1, g, 0));
    MUST(cuGraphInstantiateWithFlags(&e2, g, 0));
    MUST(cuGraphLaunch(e1, s));
    MUST(cuGraphExecDestroy(e2));
    MUST(cuGraphDestroy(g)); // the executables stand without it
    // An 8 MiB device malloc heap.
    MUST(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * kMiB));
    // B's 6 MiB of code go back.
    MUST(cuModuleUnload(mb));
    MUST(cuMemFree_v2(d));
    MUST(cuStreamSynchronize(s));
    used("used_at_exit_mib");
    return 0;
}
