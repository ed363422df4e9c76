// SPDX-License-Identifier: MIT
// Device accounting check (scripts/gpu/accounting_check.py): a program that takes device memory
// every way a CUDA program can: cudaMalloc, cudaMallocAsync from the default memory pool, VMM
// (cuMemCreate + cuMemMap), and cuBLAS (its handle's own allocations and a GEMM). With argument
// "graph" it also captures and replays a CUDA graph. Prints what it holds, then exits.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        auto e_ = (x);                                                                                                 \
        if (e_ != 0) {                                                                                                 \
            std::printf("FAIL %s = %d\n", #x, static_cast<int>(e_));                                                   \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

__global__ void scale(float* x, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

int main(int argc, char** argv) {
    const bool graph = argc > 1 && std::strcmp(argv[1], "graph") == 0;
    float* a = nullptr;
    CHECK(cudaMalloc(&a, 256 << 20));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* b = nullptr;
    CHECK(cudaMallocAsync(&b, 128 << 20, s));
    CHECK(cudaStreamSynchronize(s));
    // VMM: 64 MiB of physical memory mapped at a reserved range.
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const size_t vmm = ((64u << 20) + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, vmm, &prop, 0));
    CUdeviceptr va = 0;
    CHECK(cuMemAddressReserve(&va, vmm, 0, 0, 0));
    CHECK(cuMemMap(va, vmm, 0, h, 0));
    CUmemAccessDesc acc = {};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(va, vmm, &acc, 1));
    // cuBLAS: a handle (its workspace) and one GEMM on 1024 x 1024 matrices.
    cublasHandle_t blas;
    CHECK(cublasCreate(&blas));
    CHECK(cublasSetStream(blas, s));
    const int n = 1024;
    const float one = 1.0f, zero = 0.0f;
    CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, a + n * n, n, &zero, a + 2 * n * n, n));
    CHECK(cudaStreamSynchronize(s));
    if (graph) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        scale<<<(n * n + 255) / 256, 256, 0, s>>>(a, n * n, 0.5f);
        CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, a + n * n, n, &zero, a + 2 * n * n, n));
        CHECK(cudaStreamEndCapture(s, &g));
        CHECK(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 3; ++i)
            CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaStreamSynchronize(s));
    }
    size_t free_b = 0, total = 0;
    CHECK(cudaMemGetInfo(&free_b, &total));
    std::printf("{\"used\": %zu, \"graph\": %d}\n", total - free_b, graph ? 1 : 0);
    return 0;
}
