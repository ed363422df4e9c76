// SPDX-License-Identifier: MIT
// GPU check (faults): what a program sees of memory calls after one of its kernels faults. A
// device-side assert or an illegal address leaves the context unusable (a "sticky" error): the
// driver answers most later calls with that error. gpu_check.py runs this alone and under the
// preload (pool on and off) and compares what it prints: each call's code, in order, and the exit
// status. Usage: fault_after assert|illegal device|stream|copy|copy_async|memset|memset_async|none [probe]
//   device  the program learns of the fault from cudaDeviceSynchronize
//   stream  ... from cudaStreamSynchronize
//   copy    ... from reading a result back with cudaMemcpy
//   copy_async  ... from cudaMemcpyAsync to the host, on the faulted stream
//   memset  ... from cudaMemset; memset_async: from cudaMemsetAsync on the faulted stream. A memset
//           only queues work: made at once after the launch, it answered success on an H100
//           (2026-12-07), so these modes first wait for the faulted stream's work to end
//   none    it does not look: its next calls are frees and allocations
//   probe   (alone) also print which cheap driver calls report the sticky error, and their cost
#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>

namespace {

__global__ void fails_assert(int* p) {
    assert(p[0] == 12345);
}

__global__ void writes_wild(int* p) {
    *reinterpret_cast<volatile int*>(reinterpret_cast<char*>(p) + (1ull << 40)) = 1;
}

__global__ void touch(int* p, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        p[i] = i;
}

void say(const char* what, cudaError_t e) {
    std::printf("%s = %d\n", what, static_cast<int>(e));
    std::fflush(stdout);
}

void say_driver(const char* what, CUresult r, double ns) {
    std::printf("probe %s = %d (%.0f ns)\n", what, static_cast<int>(r), ns);
}

template <class F> void probe(const char* what, F call) {
    const auto t0 = std::chrono::steady_clock::now();
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 1000; ++i)
        r = call();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 1000;
    say_driver(what, r, ns);
}

void probe_driver(CUdeviceptr live) {
    CUcontext ctx = nullptr;
    cuCtxGetCurrent(&ctx);
    CUevent ev = nullptr;
    cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    probe("cuCtxGetDevice", [] {
        CUdevice d;
        return cuCtxGetDevice(&d);
    });
    probe("cuCtxGetApiVersion", [ctx] {
        unsigned v;
        return cuCtxGetApiVersion(ctx, &v);
    });
    probe("cuCtxGetLimit", [] {
        size_t v;
        return cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
    });
    probe("cuCtxGetFlags", [] {
        unsigned v;
        return cuCtxGetFlags(&v);
    });
    probe("cuStreamQuery(0)", [] { return cuStreamQuery(nullptr); });
    probe("cuEventQuery", [ev] { return cuEventQuery(ev); });
    probe("cuEventRecord", [ev] { return cuEventRecord(ev, nullptr); });
    probe("cuPointerGetAttribute", [live] {
        CUcontext c;
        return cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, live);
    });
    probe("cuMemGetInfo", [] {
        size_t f, t;
        return cuMemGetInfo(&f, &t);
    });
    std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s assert|illegal device|stream|copy|copy_async|memset|memset_async|none [probe]\n", argv[0]);
        return 2;
    }
    const bool use_assert = std::strcmp(argv[1], "assert") == 0;
    const char* notice = argv[2];
    const bool do_probe = argc > 3 && std::strcmp(argv[3], "probe") == 0;

    // Blocks of the sizes a pool keeps apart (small, large), live across the fault.
    int *small = nullptr, *large = nullptr, *spare = nullptr;
    static int host[64];
    say("cudaMalloc small", cudaMalloc(&small, 4096));
    say("cudaMalloc large", cudaMalloc(&large, 32 << 20));
    say("cudaMalloc spare", cudaMalloc(&spare, 4096));
    touch<<<1, 256>>>(small, 1024);
    say("cudaDeviceSynchronize before", cudaDeviceSynchronize());
    // A freed block the pool keeps: its reuse after the fault is what a pool could hide.
    say("cudaFree spare", cudaFree(spare));
    cudaStream_t s = nullptr;
    say("cudaStreamCreate", cudaStreamCreate(&s));

    if (use_assert)
        fails_assert<<<1, 1, 0, s>>>(small);
    else
        writes_wild<<<1, 1, 0, s>>>(small);
    say("cudaGetLastError after launch", cudaGetLastError());
    if (std::strncmp(notice, "memset", 6) == 0) {
        // Until the stream's work has ended (in its fault): 200 ms were not always enough for
        // an illegal address. cudaStreamQuery is not a memory call, and not watched by the pool.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (cudaStreamQuery(s) == cudaErrorNotReady && std::chrono::steady_clock::now() < until) {
        }
    }
    if (std::strcmp(notice, "device") == 0)
        say("cudaDeviceSynchronize", cudaDeviceSynchronize());
    else if (std::strcmp(notice, "stream") == 0)
        say("cudaStreamSynchronize", cudaStreamSynchronize(s));
    else if (std::strcmp(notice, "copy") == 0)
        say("cudaMemcpy to the host", cudaMemcpy(host, small, sizeof host, cudaMemcpyDeviceToHost));
    else if (std::strcmp(notice, "copy_async") == 0)
        say("cudaMemcpyAsync to the host", cudaMemcpyAsync(host, small, sizeof host, cudaMemcpyDeviceToHost, s));
    else if (std::strcmp(notice, "memset") == 0)
        say("cudaMemset", cudaMemset(small, 0, 4096));
    else if (std::strcmp(notice, "memset_async") == 0)
        say("cudaMemsetAsync", cudaMemsetAsync(small, 0, 4096, s));
    else {
        // The fault happens while the host goes on; give the device the time to reach it.
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        while (std::chrono::steady_clock::now() < until) {
        }
    }
    if (do_probe)
        probe_driver(reinterpret_cast<CUdeviceptr>(large));

    int* again = nullptr;
    say("cudaMalloc small after", cudaMalloc(&again, 4096));
    say("cudaFree small", cudaFree(small));
    say("cudaFree large", cudaFree(large));
    int* big = nullptr;
    say("cudaMalloc large after", cudaMalloc(&big, 32 << 20));
    size_t f = 0, t = 0;
    say("cudaMemGetInfo", cudaMemGetInfo(&f, &t));
    say("cudaStreamDestroy", cudaStreamDestroy(s));
    cudaStream_t s2 = nullptr;
    say("cudaStreamCreate after", cudaStreamCreate(&s2));
    say("cudaDeviceSynchronize after", cudaDeviceSynchronize());
    say("cudaGetLastError at the end", cudaGetLastError());
    std::printf("end\n");
    return 3;
}
