// SPDX-License-Identifier: MIT
// Benchmark: what a stream-ordered or managed allocation pays once PyTorch's libc10_cuda.so is
// loaded. Such a call may come from PyTorch's allocator (its async backend, a MemPool's
// allocator) or from another library of the process (CuPy, JAX, the program), so the profiler
// looks for PyTorch's allocator in the 16 innermost frames of the caller's stack
// (CallerModules::torch_allocator_in_stack). Median ns a search at about 30 frames deep, before
// and after a stand-in for libc10_cuda.so (argument 1) is loaded, beside a warm 64-frame capture
// at the same depth, all in one run. Goal: the search costs no more than 1.25x a warm walk of its
// 16 frames (looking up each frame's module, 5-10 ns a frame, would break it).
#include "core/caller_modules.hpp"
#include "median_ns.hpp"
#include "stacks/backtrace.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <dlfcn.h>
#include <link.h>
#include <thread>

using gpumemprof::bench::median_ns;
using gpumemprof::core::CallerModules;

namespace {

volatile std::uint16_t sink;
volatile int frames_sink;
double search_unloaded, search_loaded, capture64, capture16, search_then_capture;
int walked;

__attribute__((noinline)) void measure(const char* fake, bool* loaded) {
    CallerModules& m = CallerModules::instance();
    search_unloaded = median_ns([&] { sink = m.torch_allocator_in_stack(); });
    void* handle = dlopen(fake, RTLD_NOW | RTLD_GLOBAL);
    link_map* map = nullptr;
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0)
        return;
    // Taken for PyTorch's allocator by its name, and seen in the loader's list, which is looked
    // at again at most every few milliseconds.
    *loaded = m.is_torch_allocator(m.module_of(reinterpret_cast<std::uintptr_t>(map->l_ld)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sink = m.torch_allocator_in_stack();
    search_loaded = median_ns([&] { sink = m.torch_allocator_in_stack(); });
    std::uintptr_t ips[64];
    walked = gpumemprof::stacks::capture_backtrace(ips, 64, 0);
    capture64 = median_ns([&] { frames_sink = gpumemprof::stacks::capture_backtrace(ips, 64, 0); });
    capture16 = median_ns([&] { frames_sink = gpumemprof::stacks::capture_backtrace(ips, 16, 0); });
    search_then_capture = median_ns([&] {
        sink = m.torch_allocator_in_stack();
        frames_sink = gpumemprof::stacks::capture_backtrace(ips, 64, 0);
    });
}

__attribute__((noinline)) void descend(int n, const char* fake, bool* loaded) {
    if (n == 0)
        measure(fake, loaded);
    else
        descend(n - 1, fake, loaded);
    asm volatile("" ::: "memory"); // a real call chain
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_torch_search FAKE_LIBC10_CUDA\n");
        return 2;
    }
    bool loaded = false;
    descend(26, argv[1], &loaded);
    if (!loaded) {
        const char* why = dlerror();
        std::fprintf(stderr, "bench_torch_search: %s not loaded or not taken for PyTorch's allocator: %s\n", argv[1],
                     why ? why : "");
        return 1;
    }
    std::printf("looking for PyTorch's allocator in a stream-ordered call's stack, median ns\n");
    std::printf("  libc10_cuda.so not loaded (no search)              %8.1f\n", search_unloaded);
    std::printf("  loaded: 16 frames searched                         %8.1f   goal <= 1.25x the walk below  %s\n",
                search_loaded, search_loaded <= 1.25 * capture16 ? "met" : "MISSED");
    std::printf("  a warm walk of those 16 frames                     %8.1f\n", capture16);
    std::printf("  a warm capture of the %d frames there              %8.1f\n", walked, capture64);
    std::printf("  the search, then that capture (stacks on)          %8.1f   the search adds %.1f\n",
                search_then_capture, search_then_capture - capture64);
    // A search that found the library not loaded costs what the unloaded line does: no walk.
    if (search_loaded < 2 * search_unloaded) {
        std::fprintf(stderr, "bench_torch_search: the search did not walk once the library was loaded\n");
        return 1;
    }
    return 0;
}
