// SPDX-License-Identifier: MIT
// GPU check (samples): what NVIDIA's CUDA samples do with memory, one section each, every result
// checked on the host. gpu_check.py runs it without the preload and under it (pool on and off) and
// compares stdout line for line: the checksums, the error codes of calls that must fail, and what
// the program reads of its own memory (pointer attributes, a pool's and graphs' used memory).
// The last line is JSON: the bytes the program took through each door, for the report's counts.
// Then it resets the device, as the samples end.
//   pitch    cudaMallocPitch/cudaMemcpy2D, cudaMalloc3D/cudaMemcpy3D, cuMemAllocPitch
//   arrays   cudaMallocArray + a texture object, cudaMalloc3DArray + a surface object
//   host     cudaHostAlloc (mapped), cudaHostRegister, cudaMallocHost
//   managed  cudaMallocManaged, prefetch, advice, attach to a stream
//   pools    cudaMemPoolCreate, cudaMallocFromPoolAsync, trim, the pool's own used figure
//   graphs   cudaMallocAsync/cudaFreeAsync captured (graph memory nodes), an explicit
//            cudaGraphAddMemAllocNode, replays, graph memory trim
//   queries  cudaPointerGetAttributes of each kind, cuMemGetAddressRange inside a block
//   errors   calls that must fail, and their codes
//   threads  8 threads allocating, filling and checking on their own streams
//   context  a context of its own (cuCtxCreate), allocations in it, destroyed with one still live
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

long long g_malloc_bytes = 0, g_malloc_calls = 0; // cudaMalloc, cudaMallocPitch, cudaMalloc3D, cuMemAlloc*

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        const int e_ = static_cast<int>(x);                                                                            \
        if (e_ != 0) {                                                                                                 \
            std::printf("FAIL %s:%d %s = %d\n", __func__, __LINE__, #x, e_);                                          \
            std::fflush(stdout);                                                                                       \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

std::uint64_t fnv(const void* p, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

__global__ void fill2d(float* p, std::size_t pitch, int w, int h) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        reinterpret_cast<float*>(reinterpret_cast<char*>(p) + y * pitch)[x] = static_cast<float>(x * 3 + y * 7);
}

__global__ void scale(float* p, int n, float a) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] = p[i] * a + 1.0f;
}

__global__ void read_tex(cudaTextureObject_t t, float* out, int w, int h) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f) * 2.0f;
}

__global__ void write_surf(cudaSurfaceObject_t s, int w, int h, int d) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        for (int z = 0; z < d; ++z)
            surf3Dwrite(static_cast<float>(x + 10 * y + 100 * z), s, x * static_cast<int>(sizeof(float)), y, z);
}

__global__ void write_mapped(int* p, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] = i * 5 + 3;
}

/// With SAMPLES_MEMINFO set, the driver's used figure at this point, on stderr (stdout is compared).
void meminfo(const char* where) {
    static const bool on = std::getenv("SAMPLES_MEMINFO") != nullptr;
    std::size_t free_b = 0, total = 0;
    if (on && cudaMemGetInfo(&free_b, &total) == cudaSuccess)
        std::fprintf(stderr, "meminfo %-28s used %8.2f MiB\n", where, static_cast<double>(total - free_b) / 1048576.0);
}

void section(const char* name, std::uint64_t sum) {
    meminfo(name);
    std::printf("%s ok checksum=%016llx\n", name, static_cast<unsigned long long>(sum));
    std::fflush(stdout);
}

void pitch() {
    const int w = 1000, h = 300;
    float* d = nullptr;
    std::size_t p = 0;
    CHECK(cudaMallocPitch(reinterpret_cast<void**>(&d), &p, w * sizeof(float), h));
    g_malloc_bytes += static_cast<long long>(p) * h;
    ++g_malloc_calls;
    fill2d<<<dim3((w + 31) / 32, (h + 7) / 8), dim3(32, 8)>>>(d, p, w, h);
    std::vector<float> host(static_cast<std::size_t>(w) * h);
    CHECK(cudaMemcpy2D(host.data(), w * sizeof(float), d, p, w * sizeof(float), h, cudaMemcpyDeviceToHost));
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            if (host[static_cast<std::size_t>(y) * w + x] != static_cast<float>(x * 3 + y * 7)) {
                std::printf("FAIL pitch: (%d,%d)\n", x, y);
                std::exit(1);
            }
    std::uint64_t sum = fnv(host.data(), host.size() * sizeof(float));
    // The pitch is the program's to see: the driver's alignment, not the pool's.
    std::printf("pitch pitch_bytes=%zu\n", p);
    CHECK(cudaFree(d));

    cudaPitchedPtr v{};
    const cudaExtent e = make_cudaExtent(64 * sizeof(float), 32, 16);
    CHECK(cudaMalloc3D(&v, e));
    g_malloc_bytes += static_cast<long long>(v.pitch) * 32 * 16;
    ++g_malloc_calls;
    CHECK(cudaMemset3D(v, 0x3c, e));
    std::vector<unsigned char> h3(64 * sizeof(float) * 32 * 16);
    cudaMemcpy3DParms c{};
    c.srcPtr = v;
    c.dstPtr = make_cudaPitchedPtr(h3.data(), 64 * sizeof(float), 64, 32);
    c.extent = e;
    c.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&c));
    for (unsigned char b : h3)
        if (b != 0x3c) {
            std::printf("FAIL pitch: 3D memset\n");
            std::exit(1);
        }
    sum = fnv(h3.data(), h3.size(), sum);
    CHECK(cudaFree(v.ptr));

    CUdeviceptr dp = 0;
    std::size_t dpitch = 0;
    CHECK(cuMemAllocPitch(&dp, &dpitch, 333, 77, 16));
    g_malloc_bytes += static_cast<long long>(dpitch) * 77;
    ++g_malloc_calls;
    CHECK(cuMemsetD2D8(dp, dpitch, 0x5a, 333, 77));
    std::vector<unsigned char> h2(333 * 77);
    CHECK(cudaMemcpy2D(h2.data(), 333, reinterpret_cast<void*>(dp), dpitch, 333, 77, cudaMemcpyDeviceToHost));
    for (unsigned char b : h2)
        if (b != 0x5a) {
            std::printf("FAIL pitch: cuMemsetD2D8\n");
            std::exit(1);
        }
    sum = fnv(h2.data(), h2.size(), sum);
    std::printf("pitch driver_pitch_bytes=%zu\n", dpitch);
    CHECK(cuMemFree(dp));
    section("pitch", sum);
}

void arrays() {
    const int w = 256, h = 128;
    cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
    cudaArray_t a = nullptr;
    CHECK(cudaMallocArray(&a, &f, w, h));
    std::vector<float> src(static_cast<std::size_t>(w) * h);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<float>(i % 977) * 0.5f;
    CHECK(cudaMemcpy2DToArray(a, 0, 0, src.data(), w * sizeof(float), w * sizeof(float), h, cudaMemcpyHostToDevice));
    cudaResourceDesc rd{};
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = a;
    cudaTextureDesc td{};
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModePoint;
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t t = 0;
    CHECK(cudaCreateTextureObject(&t, &rd, &td, nullptr));
    float* out = nullptr;
    CHECK(cudaMalloc(&out, src.size() * sizeof(float)));
    g_malloc_bytes += static_cast<long long>(src.size() * sizeof(float));
    ++g_malloc_calls;
    read_tex<<<dim3(w / 16, h / 16), dim3(16, 16)>>>(t, out, w, h);
    std::vector<float> got(src.size());
    CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != src[i] * 2.0f) {
            std::printf("FAIL arrays: texture at %zu\n", i);
            std::exit(1);
        }
    std::uint64_t sum = fnv(got.data(), got.size() * sizeof(float));
    CHECK(cudaDestroyTextureObject(t));
    CHECK(cudaFree(out));
    CHECK(cudaFreeArray(a));

    const int d = 8;
    cudaArray_t a3 = nullptr;
    CHECK(cudaMalloc3DArray(&a3, &f, make_cudaExtent(64, 64, d), cudaArraySurfaceLoadStore));
    rd.res.array.array = a3;
    cudaSurfaceObject_t s = 0;
    CHECK(cudaCreateSurfaceObject(&s, &rd));
    meminfo("arrays: 3D array and surface");
    write_surf<<<dim3(4, 4), dim3(16, 16)>>>(s, 64, 64, d);
    std::vector<float> h3(64 * 64 * d);
    cudaMemcpy3DParms c{};
    c.srcArray = a3;
    c.dstPtr = make_cudaPitchedPtr(h3.data(), 64 * sizeof(float), 64, 64);
    c.extent = make_cudaExtent(64, 64, d);
    c.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&c));
    for (int z = 0; z < d; ++z)
        for (int y = 0; y < 64; ++y)
            for (int x = 0; x < 64; ++x)
                if (h3[(z * 64 + y) * 64 + x] != static_cast<float>(x + 10 * y + 100 * z)) {
                    std::printf("FAIL arrays: surface at (%d,%d,%d)\n", x, y, z);
                    std::exit(1);
                }
    sum = fnv(h3.data(), h3.size() * sizeof(float), sum);
    CHECK(cudaDestroySurfaceObject(s));
    CHECK(cudaFreeArray(a3));
    section("arrays", sum);
}

void host() {
    const int n = 1 << 20;
    int* hp = nullptr;
    CHECK(cudaHostAlloc(reinterpret_cast<void**>(&hp), n * sizeof(int), cudaHostAllocMapped));
    int* dp = nullptr;
    CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dp), hp, 0));
    meminfo("host: mapped");
    write_mapped<<<128, 256>>>(dp, n);
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < n; ++i)
        if (hp[i] != i * 5 + 3) {
            std::printf("FAIL host: mapped at %d\n", i);
            std::exit(1);
        }
    std::uint64_t sum = fnv(hp, n * sizeof(int));
    CHECK(cudaFreeHost(hp));

    std::vector<int> reg(n + 1024); // registered host memory of the program's own
    CHECK(cudaHostRegister(reg.data(), reg.size() * sizeof(int), cudaHostRegisterMapped));
    CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dp), reg.data(), 0));
    write_mapped<<<128, 256>>>(dp, n);
    CHECK(cudaDeviceSynchronize());
    sum = fnv(reg.data(), n * sizeof(int), sum);
    CHECK(cudaHostUnregister(reg.data()));

    float* pinned = nullptr;
    CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * sizeof(float)));
    float* dev = nullptr;
    CHECK(cudaMalloc(&dev, n * sizeof(float)));
    g_malloc_bytes += n * static_cast<long long>(sizeof(float));
    ++g_malloc_calls;
    for (int i = 0; i < n; ++i)
        pinned[i] = static_cast<float>(i & 1023);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMemcpyAsync(dev, pinned, n * sizeof(float), cudaMemcpyHostToDevice, s));
    scale<<<256, 256, 0, s>>>(dev, n, 2.0f);
    CHECK(cudaMemcpyAsync(pinned, dev, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; ++i)
        if (pinned[i] != static_cast<float>(i & 1023) * 2.0f + 1.0f) {
            std::printf("FAIL host: pinned copy at %d\n", i);
            std::exit(1);
        }
    sum = fnv(pinned, n * sizeof(float), sum);
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dev));
    CHECK(cudaFreeHost(pinned));
    section("host", sum);
}

void managed() {
    const int n = 1 << 22;
    float* m = nullptr;
    CHECK(cudaMallocManaged(&m, n * sizeof(float)));
    for (int i = 0; i < n; ++i)
        m[i] = static_cast<float>(i % 311);
    int dev = 0;
    CHECK(cudaGetDevice(&dev));
    cudaMemLocation loc{};
    loc.type = cudaMemLocationTypeDevice;
    loc.id = dev;
    CHECK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetPreferredLocation, loc));
    CHECK(cudaMemPrefetchAsync(m, n * sizeof(float), loc, 0, 0));
    scale<<<512, 256>>>(m, n, 3.0f);
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < n; ++i)
        if (m[i] != static_cast<float>(i % 311) * 3.0f + 1.0f) {
            std::printf("FAIL managed at %d\n", i);
            std::exit(1);
        }
    meminfo("managed: 16 MiB on the device");
    std::uint64_t sum = fnv(m, n * sizeof(float));
    CHECK(cudaFree(m));

    // A stream-attached allocation (the simpleStreams / UnifiedMemoryStreams pattern).
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float* a = nullptr;
    CHECK(cudaMallocManaged(&a, 4096 * sizeof(float), cudaMemAttachHost));
    CHECK(cudaStreamAttachMemAsync(s, a, 0, cudaMemAttachSingle));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 4096; ++i)
        a[i] = static_cast<float>(i);
    scale<<<16, 256, 0, s>>>(a, 4096, 0.5f);
    CHECK(cudaStreamSynchronize(s));
    sum = fnv(a, 4096 * sizeof(float), sum);
    CHECK(cudaFree(a));
    CHECK(cudaStreamDestroy(s));
    section("managed", sum);
}

void pools() {
    int dev = 0;
    CHECK(cudaGetDevice(&dev));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t threshold = 64ull << 20;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::uint64_t sum = 1469598103934665603ull;
    std::vector<float> host(1 << 18);
    for (int round = 0; round < 20; ++round) {
        float* p = nullptr;
        CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&p), host.size() * sizeof(float), pool, s));
        CHECK(cudaMemsetAsync(p, 0, host.size() * sizeof(float), s));
        scale<<<64, 256, 0, s>>>(p, static_cast<int>(host.size()), 1.0f + round);
        CHECK(cudaMemcpyAsync(host.data(), p, host.size() * sizeof(float), cudaMemcpyDeviceToHost, s));
        CHECK(cudaFreeAsync(p, s));
        CHECK(cudaStreamSynchronize(s));
        sum = fnv(host.data(), host.size() * sizeof(float), sum);
    }
    // What the program reads of its own pool: the bytes in use (0 after the frees) and the
    // high-water mark of its allocations.
    meminfo("pools: after 20 rounds");
    std::uint64_t used = 0, high = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
    std::printf("pools used_current=%llu used_high=%llu\n", static_cast<unsigned long long>(used),
                static_cast<unsigned long long>(high));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    meminfo("pools: trimmed");
    CHECK(cudaMemPoolDestroy(pool));
    meminfo("pools: destroyed");

    // The device's default pool, through cudaMallocAsync.
    float* q = nullptr;
    CHECK(cudaMallocAsync(reinterpret_cast<void**>(&q), 3 << 20, s));
    CHECK(cudaMemsetAsync(q, 1, 3 << 20, s));
    CHECK(cudaFreeAsync(q, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
    section("pools", sum);
}

void graphs() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const int n = 1 << 20;
    float* out = nullptr;
    CHECK(cudaMalloc(&out, n * sizeof(float)));
    g_malloc_bytes += n * static_cast<long long>(sizeof(float));
    ++g_malloc_calls;
    CHECK(cudaMemset(out, 0, n * sizeof(float)));
    // Captured: a temporary from cudaMallocAsync (a graph memory node), used, copied out and
    // freed inside the graph (the graphMemoryNodes sample's pattern).
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    float* tmp = nullptr;
    CHECK(cudaMallocAsync(reinterpret_cast<void**>(&tmp), n * sizeof(float), s));
    CHECK(cudaMemcpyAsync(tmp, out, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    scale<<<256, 256, 0, s>>>(tmp, n, 2.0f);
    CHECK(cudaMemcpyAsync(out, tmp, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    CHECK(cudaFreeAsync(tmp, s));
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 10; ++i)
        CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    meminfo("graphs: captured, launched");
    std::vector<float> host(n);
    CHECK(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    // x -> 2x + 1, ten times from 0: 2^10 - 1.
    for (int i = 0; i < n; ++i)
        if (host[i] != 1023.0f) {
            std::printf("FAIL graphs: captured at %d: %f\n", i, host[i]);
            std::exit(1);
        }
    std::uint64_t sum = fnv(host.data(), host.size() * sizeof(float));
    int dev = 0;
    CHECK(cudaGetDevice(&dev));
    std::uint64_t reserved = 0;
    CHECK(cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrReservedMemHigh, &reserved));
    std::printf("graphs graph_memory_reserved_high=%s\n", reserved >= n * sizeof(float) ? "at least the node" : "less");

    // Built by hand: an allocation node, a kernel on it, a free node.
    cudaGraph_t g2;
    CHECK(cudaGraphCreate(&g2, 0));
    cudaMemAllocNodeParams ap{};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = dev;
    ap.bytesize = n * sizeof(float);
    cudaGraphNode_t alloc_node, set_node, copy_node, free_node;
    CHECK(cudaGraphAddMemAllocNode(&alloc_node, g2, nullptr, 0, &ap));
    float* node_mem = static_cast<float*>(ap.dptr);
    cudaMemsetParams ms{};
    ms.dst = node_mem;
    ms.value = 0x3f800000u; // 1.0f
    ms.elementSize = 4;
    ms.width = n;
    ms.height = 1;
    CHECK(cudaGraphAddMemsetNode(&set_node, g2, &alloc_node, 1, &ms));
    CHECK(cudaGraphAddMemcpyNode1D(&copy_node, g2, &set_node, 1, out, node_mem, n * sizeof(float),
                                   cudaMemcpyDeviceToDevice));
    CHECK(cudaGraphAddMemFreeNode(&free_node, g2, &copy_node, 1, node_mem));
    cudaGraphExec_t ge2;
    CHECK(cudaGraphInstantiate(&ge2, g2, 0));
    CHECK(cudaGraphLaunch(ge2, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
        if (host[i] != 1.0f) {
            std::printf("FAIL graphs: built at %d\n", i);
            std::exit(1);
        }
    sum = fnv(host.data(), host.size() * sizeof(float), sum);
    CHECK(cudaGraphExecDestroy(ge2));
    CHECK(cudaGraphDestroy(g2));
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    meminfo("graphs: destroyed");
    CHECK(cudaDeviceGraphMemTrim(dev));
    meminfo("graphs: trimmed");
    CHECK(cudaFree(out));
    CHECK(cudaStreamDestroy(s));
    section("graphs", sum);
}

void queries() {
    void* d = nullptr;
    CHECK(cudaMalloc(&d, 5 << 20));
    g_malloc_bytes += 5 << 20;
    ++g_malloc_calls;
    void* m = nullptr;
    CHECK(cudaMallocManaged(&m, 1 << 20));
    void* h = nullptr;
    CHECK(cudaMallocHost(&h, 1 << 20));
    int x = 0;
    const struct {
        const char* name;
        const void* p;
    } ptrs[] = {{"device", d}, {"device+1MiB", static_cast<char*>(d) + (1 << 20)}, {"managed", m}, {"pinned", h},
                {"stack", &x}};
    for (const auto& q : ptrs) {
        cudaPointerAttributes a{};
        const cudaError_t e = cudaPointerGetAttributes(&a, q.p);
        std::printf("queries %s: error=%d type=%d same_device_pointer=%d\n", q.name, static_cast<int>(e),
                    static_cast<int>(a.type), a.devicePointer == q.p ? 1 : 0);
    }
    // cuMemGetAddressRange answers with the block the program asked for, wherever it lies.
    CUdeviceptr base = 0;
    std::size_t size = 0;
    CHECK(cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(d) + 12345));
    std::printf("queries address range: base_is_block=%d size=%zu\n",
                base == reinterpret_cast<CUdeviceptr>(d) ? 1 : 0, size);
    unsigned int mem_type = 0;
    CHECK(cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(d)));
    std::printf("queries memory type=%u\n", mem_type);
    CHECK(cudaFree(d));
    CHECK(cudaFree(m));
    CHECK(cudaFreeHost(h));
    section("queries", 0);
}

void errors() {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(1) << 50); // far beyond any device
    std::printf("errors huge cudaMalloc=%d null=%d\n", static_cast<int>(e), p == nullptr ? 1 : 0);
    std::printf("errors then cudaGetLastError=%d\n", static_cast<int>(cudaGetLastError()));
    std::printf("errors cudaFree(nullptr)=%d\n", static_cast<int>(cudaFree(nullptr)));
    int on_stack = 0;
    std::printf("errors cudaFree(host pointer)=%d\n", static_cast<int>(cudaFree(&on_stack)));
    std::printf("errors then cudaGetLastError=%d\n", static_cast<int>(cudaGetLastError()));
    CHECK(cudaMalloc(&p, 1 << 20));
    g_malloc_bytes += 1 << 20;
    ++g_malloc_calls;
    std::printf("errors cudaFree(inside a block)=%d\n", static_cast<int>(cudaFree(static_cast<char*>(p) + 256)));
    std::printf("errors then cudaGetLastError=%d\n", static_cast<int>(cudaGetLastError()));
    CHECK(cudaFree(p));
    std::printf("errors cudaMalloc(0)=%d\n", static_cast<int>(cudaMalloc(&p, 0)));
    if (p != nullptr)
        CHECK(cudaFree(p));
    std::printf("errors cudaMalloc(null out)=%d\n", static_cast<int>(cudaMalloc(nullptr, 4096)));
    std::printf("errors then cudaGetLastError=%d\n", static_cast<int>(cudaGetLastError()));
    CUdeviceptr dp = 0;
    std::printf("errors huge cuMemAlloc=%d\n", static_cast<int>(cuMemAlloc(&dp, static_cast<std::size_t>(1) << 50)));
    std::printf("errors cuMemFree(0)=%d\n", static_cast<int>(cuMemFree(0)));
    section("errors", 0);
}

void threads() {
    std::atomic<int> bad{0};
    std::atomic<long long> bytes{0}, calls{0};
    std::vector<std::thread> ts;
    std::vector<std::uint64_t> sums(8);
    for (int t = 0; t < 8; ++t)
        ts.emplace_back([t, &bad, &bytes, &calls, &sums] {
            cudaStream_t s;
            if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
                ++bad;
                return;
            }
            std::uint64_t sum = 1469598103934665603ull;
            for (int i = 0; i < 200; ++i) {
                const int n = 1024 * (1 + (i * 7 + t) % 300);
                float* p = nullptr;
                if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) {
                    ++bad;
                    break;
                }
                bytes += n * static_cast<long long>(sizeof(float));
                ++calls;
                cudaMemsetAsync(p, 0, n * sizeof(float), s);
                scale<<<32, 256, 0, s>>>(p, n, 1.0f);
                float last = 0;
                cudaMemcpyAsync(&last, p + n - 1, sizeof last, cudaMemcpyDeviceToHost, s);
                cudaStreamSynchronize(s);
                if (last != 1.0f)
                    ++bad;
                sum = fnv(&last, sizeof last, sum);
                if (cudaFree(p) != cudaSuccess)
                    ++bad;
            }
            cudaStreamDestroy(s);
            sums[t] = sum;
        });
    for (auto& th : ts)
        th.join();
    if (bad != 0) {
        std::printf("FAIL threads: %d bad results\n", bad.load());
        std::exit(1);
    }
    g_malloc_bytes += bytes;
    g_malloc_calls += calls;
    std::uint64_t sum = 1469598103934665603ull;
    for (std::uint64_t s : sums)
        sum = fnv(&s, sizeof s, sum);
    section("threads", sum);
}

void context() {
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CUcontext primary = nullptr;
    CHECK(cuCtxGetCurrent(&primary));
    CUcontext own = nullptr;
    CUctxCreateParams params{};
    CHECK(cuCtxCreate(&own, &params, 0, dev));
    CUdeviceptr a = 0, b = 0;
    CHECK(cuMemAlloc(&a, 8 << 20));
    CHECK(cuMemAlloc(&b, 1 << 20));
    g_malloc_bytes += (8 << 20) + (1 << 20);
    g_malloc_calls += 2;
    meminfo("context: created, 9 MiB in it");
    CHECK(cuMemsetD32(a, 0x01020304u, (8 << 20) / 4));
    std::vector<std::uint32_t> host((8 << 20) / 4);
    CHECK(cuMemcpyDtoH(host.data(), a, 8 << 20));
    for (std::uint32_t v : host)
        if (v != 0x01020304u) {
            std::printf("FAIL context: memset\n");
            std::exit(1);
        }
    const std::uint64_t sum = fnv(host.data(), 8 << 20);
    CHECK(cuMemFree(a));
    // b is still live when its context goes: the context takes it with it.
    CHECK(cuCtxDestroy(own));
    CHECK(cuCtxSetCurrent(primary));
    meminfo("context: destroyed");
    // The primary context is untouched: a new block there works.
    void* p = nullptr;
    CHECK(cudaMalloc(&p, 2 << 20));
    g_malloc_bytes += 2 << 20;
    ++g_malloc_calls;
    CHECK(cudaMemset(p, 7, 2 << 20));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(p));
    section("context", sum);
}

} // namespace

int main(int argc, char** argv) {
    const std::string only = argc > 1 ? argv[1] : "all";
    auto want = [&](const char* s) { return only == "all" || only == s; };
    CHECK(cudaFree(nullptr)); // the runtime's context, as the samples start
    meminfo("start");
    if (want("pitch"))
        pitch();
    if (want("arrays"))
        arrays();
    if (want("host"))
        host();
    if (want("managed"))
        managed();
    if (want("pools"))
        pools();
    if (want("graphs"))
        graphs();
    if (want("queries"))
        queries();
    if (want("errors"))
        errors();
    if (want("threads"))
        threads();
    if (want("context"))
        context();
    CHECK(cudaDeviceSynchronize());
    std::printf("{\"malloc_calls\": %lld, \"malloc_bytes\": %lld}\n", g_malloc_calls, g_malloc_bytes);
    std::fflush(stdout);
    CHECK(cudaDeviceReset()); // as the samples end: the context goes before the exit's report
    return 0;
}
