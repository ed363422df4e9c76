// SPDX-License-Identifier: MIT
// Unit tests of the simulated driver/runtime: proc-address ABI selection, capacity, stream order, frees.
#define __CUDA_API_VERSION_INTERNAL 1 // the exported legacy spellings (cuMemAlloc, 4-arg cuGetProcAddress)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <thread>
#include <vector>

extern "C" long long simcuda_stat(const char* key);
extern "C" int simcuda_unknown_abis();

namespace {

constexpr size_t kMiB = 1 << 20;

/// One process, one cuInit: capacity 64 MiB for every test below (set before the first cuInit).
CUcontext init_sim() {
    static CUcontext ctx = [] {
        setenv("SIMCUDA_CAPACITY", "64M", 1);
        REQUIRE(cuInit(0) == CUDA_SUCCESS);
        CUcontext c = nullptr;
        REQUIRE(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS);
        return c;
    }();
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    return ctx;
}

void* sim_symbol(const char* name) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(h != nullptr);
    return dlsym(h, name);
}

void* proc(const char* name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* st) {
    void* p = reinterpret_cast<void*>(1);
    REQUIRE(cuGetProcAddress_v2(name, &p, version, flags, st) == CUDA_SUCCESS);
    return p;
}

} // namespace

TEST_CASE("every driver call before cuInit reports CUDA_ERROR_NOT_INITIALIZED", "[sim]") {
    // Declared first so it runs before any test calls cuInit (Catch runs in declaration order).
    if (simcuda_stat("ok:cuInit") > 0) {
        WARN("cuInit already ran in this process (test order changed); not checked");
        return;
    }
    CUdeviceptr d = 0;
    CHECK(cuMemAlloc_v2(&d, 1024) == CUDA_ERROR_NOT_INITIALIZED);
    int n = 0;
    CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
    int v = 0;
    CHECK(cuDriverGetVersion(&v) == CUDA_SUCCESS); // allowed before cuInit
    CHECK(v == 13000);
}

TEST_CASE("cuGetProcAddress_v2 picks the ABI by version and flags", "[sim][procaddr]") {
    CUdriverProcAddressQueryResult st{};
    // cudaTypedefs.h: PFN_cuMemAlloc_v3020 is cuMemAlloc_v2, PFN_cuMemAlloc_v2000 the legacy one.
    CHECK(proc("cuMemAlloc", 3020, 0, &st) == sim_symbol("cuMemAlloc_v2"));
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(proc("cuMemAlloc", 13000, 0, &st) == sim_symbol("cuMemAlloc_v2"));
    CHECK(proc("cuMemAlloc", 2000, 0, &st) == sim_symbol("cuMemAlloc"));
    CHECK(proc("cuMemAlloc", 3010, 0, &st) == sim_symbol("cuMemAlloc"));
    // flags 2 selects the per-thread variant; 0 and 1 the legacy-stream one.
    CHECK(proc("cuMemAllocAsync", 11020, 2, &st) == sim_symbol("cuMemAllocAsync_ptsz"));
    CHECK(proc("cuMemAllocAsync", 11020, 1, &st) == sim_symbol("cuMemAllocAsync"));
    CHECK(proc("cuMemAllocAsync", 12000, 0, &st) == sim_symbol("cuMemAllocAsync"));
    CHECK(proc("cuStreamBeginCapture", 10010, 2, &st) == sim_symbol("cuStreamBeginCapture_v2_ptsz"));
    CHECK(proc("cuStreamBeginCapture", 10000, 2, &st) == sim_symbol("cuStreamBeginCapture_ptsz"));
    // No per-thread ABI at 3020 (the _ptds one is 7000): falls back to the legacy version.
    CHECK(proc("cuMemcpyHtoD", 3020, 2, &st) == sim_symbol("cuMemcpyHtoD_v2"));
    CHECK(proc("cuMemcpyHtoD", 7000, 2, &st) == sim_symbol("cuMemcpyHtoD_v2_ptds"));
    // The lookup functions themselves: 11030 is the 4-argument one, 12000 the _v2.
    CHECK(proc("cuGetProcAddress", 11030, 0, &st) == sim_symbol("cuGetProcAddress"));
    CHECK(proc("cuGetProcAddress", 12000, 0, &st) == sim_symbol("cuGetProcAddress_v2"));
    CHECK(sim_symbol("cuGetProcAddress") != sim_symbol("cuGetProcAddress_v2"));
}

TEST_CASE("cuGetProcAddress_v2 failure contract", "[sim][procaddr]") {
    CUdriverProcAddressQueryResult st{};
    CHECK(proc("cuNoSuchFunction", 12000, 0, &st) == nullptr);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(proc("cuMemAllocAsync", 11010, 0, &st) == nullptr); // introduced in 11020
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    // The newest ABI at or below the version asked for: _v3 (11040) for 12000, _v4 from 12050.
    CHECK(proc("cuCtxCreate", 11030, 0, &st) == sim_symbol("cuCtxCreate_v2"));
    CHECK(proc("cuCtxCreate", 12000, 0, &st) == sim_symbol("cuCtxCreate_v3"));
    CHECK(proc("cuCtxCreate", 12050, 0, &st) == sim_symbol("cuCtxCreate_v4"));
    void* p = nullptr;
    CHECK(cuGetProcAddress_v2("cuMemAlloc", &p, 13010, 0, &st) == CUDA_ERROR_INVALID_VALUE);
    // The 4-argument ABI answers the same way.
    CHECK(cuGetProcAddress("cuMemFree", &p, 3020, 0) == CUDA_SUCCESS);
    CHECK(p == sim_symbol("cuMemFree_v2"));
    CHECK(simcuda_unknown_abis() == 0);
}

TEST_CASE("capacity is enforced and cuMemGetInfo reports capacity - used", "[sim][memory]") {
    init_sim();
    size_t free0 = 0, total = 0;
    REQUIRE(cuMemGetInfo_v2(&free0, &total) == CUDA_SUCCESS);
    CHECK(total == 64 * kMiB);
    CUdeviceptr a = 0, b = 0, c = 0;
    REQUIRE(cuMemAlloc_v2(&a, 40 * kMiB) == CUDA_SUCCESS);
    CHECK(a % 512 == 0);
    size_t free1 = 0;
    REQUIRE(cuMemGetInfo_v2(&free1, &total) == CUDA_SUCCESS);
    CHECK(free0 - free1 == 40 * kMiB);
    // 1000 B is charged as 1024 (512-byte units): free drops by 1024.
    REQUIRE(cuMemAlloc_v2(&c, 1000) == CUDA_SUCCESS);
    size_t free2 = 0;
    REQUIRE(cuMemGetInfo_v2(&free2, &total) == CUDA_SUCCESS);
    CHECK(free1 - free2 == 1024);
    CHECK(cuMemAlloc_v2(&b, 30 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY); // 40 + 30 > 64
    REQUIRE(cuMemFree_v2(a) == CUDA_SUCCESS);
    REQUIRE(cuMemAlloc_v2(&b, 30 * kMiB) == CUDA_SUCCESS);
    // The memory is real: write and read back through the copy API.
    std::vector<unsigned char> in(4096, 0xab), out(4096, 0);
    REQUIRE(cuMemcpyHtoD_v2(b, in.data(), in.size()) == CUDA_SUCCESS);
    REQUIRE(cuMemcpyDtoH_v2(out.data(), b, out.size()) == CUDA_SUCCESS);
    CHECK(out == in);
    REQUIRE(cuMemFree_v2(b) == CUDA_SUCCESS);
    REQUIRE(cuMemFree_v2(c) == CUDA_SUCCESS);
    REQUIRE(cuMemGetInfo_v2(&free1, &total) == CUDA_SUCCESS);
    CHECK(free1 == free0);
}

TEST_CASE("bad frees return the real driver's codes", "[sim][memory]") {
    init_sim();
    CUdeviceptr a = 0;
    REQUIRE(cuMemAlloc_v2(&a, 4096) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(0) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(a + 512) == CUDA_ERROR_INVALID_VALUE);   // interior pointer
    CHECK(cuMemFree_v2(0x1234500) == CUDA_ERROR_INVALID_VALUE); // never allocated
    CHECK(cuMemFree_v2(a) == CUDA_SUCCESS);
    CHECK(cuMemFree_v2(a) == CUDA_ERROR_INVALID_VALUE); // double free
    CHECK(cuMemFreeHost(nullptr) == CUDA_SUCCESS);
    // Runtime view: cudaFree(NULL) is success, an invalid pointer is cudaErrorInvalidValue (1).
    CHECK(cudaFree(nullptr) == cudaSuccess);
    CHECK(cudaFree(reinterpret_cast<void*>(0x1234500)) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaSuccess);
}

namespace {
std::atomic<int> g_step{0};
struct Probe {
    int sleep_ms;
    int seen = -1;
    int set_to;
};
void probe_fn(void* arg) {
    auto* p = static_cast<Probe*>(arg);
    std::this_thread::sleep_for(std::chrono::milliseconds(p->sleep_ms));
    p->seen = g_step.load();
    if (p->set_to >= 0)
        g_step = p->set_to;
}
} // namespace

TEST_CASE("legacy default stream orders against blocking streams, not non-blocking ones", "[sim][streams]") {
    init_sim();
    CUstream blocking = nullptr, nonblocking = nullptr;
    REQUIRE(cuStreamCreate(&blocking, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
    REQUIRE(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);

    g_step = 0;
    Probe slow_blocking{60, -1, 1}; // sets step 1 after 60 ms
    Probe on_legacy{0, -1, 2};      // must see 1: waits for the blocking stream's prior work
    Probe after_legacy{0, -1, -1};  // blocking stream again: must see 2 (waits for legacy)
    REQUIRE(cuLaunchHostFunc(blocking, probe_fn, &slow_blocking) == CUDA_SUCCESS);
    REQUIRE(cuLaunchHostFunc(nullptr, probe_fn, &on_legacy) == CUDA_SUCCESS);
    REQUIRE(cuLaunchHostFunc(blocking, probe_fn, &after_legacy) == CUDA_SUCCESS);
    REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(slow_blocking.seen == 0);
    CHECK(on_legacy.seen == 1);
    CHECK(after_legacy.seen == 2);

    g_step = 0;
    Probe slow_nonblocking{100, -1, 5};
    Probe legacy2{0, -1, -1}; // does not wait for the non-blocking stream: sees 0
    REQUIRE(cuLaunchHostFunc(nonblocking, probe_fn, &slow_nonblocking) == CUDA_SUCCESS);
    REQUIRE(cuLaunchHostFunc(CU_STREAM_LEGACY, probe_fn, &legacy2) == CUDA_SUCCESS);
    REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
    CHECK(legacy2.seen == 0);
    CHECK(cuStreamQuery(nonblocking) == CUDA_ERROR_NOT_READY); // still sleeping
    CUevent ev = nullptr;
    REQUIRE(cuEventCreate(&ev, 0) == CUDA_SUCCESS);
    REQUIRE(cuEventRecord(ev, nonblocking) == CUDA_SUCCESS);
    CHECK(cuEventQuery(ev) == CUDA_ERROR_NOT_READY);
    REQUIRE(cuEventSynchronize(ev) == CUDA_SUCCESS);
    CHECK(g_step == 5);
    CHECK(cuEventQuery(ev) == CUDA_SUCCESS);
    // An event recorded on the legacy stream is complete once the context is synchronised.
    Probe slow_legacy{40, -1, -1};
    REQUIRE(cuLaunchHostFunc(nullptr, probe_fn, &slow_legacy) == CUDA_SUCCESS);
    REQUIRE(cuEventRecord(ev, nullptr) == CUDA_SUCCESS);
    CHECK(cuEventQuery(ev) == CUDA_ERROR_NOT_READY);
    REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK(cuEventQuery(ev) == CUDA_SUCCESS);
    REQUIRE(cuEventDestroy_v2(ev) == CUDA_SUCCESS);
    REQUIRE(cuStreamDestroy_v2(blocking) == CUDA_SUCCESS);
    REQUIRE(cuStreamDestroy_v2(nonblocking) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(blocking) == CUDA_ERROR_INVALID_HANDLE);
}

namespace {
struct Reader {
    unsigned char* buf;
    size_t n;
    bool intact = false;
};
void read_later(void* arg) {
    auto* r = static_cast<Reader*>(arg);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r->intact = true;
    for (size_t i = 0; i < r->n; ++i)
        r->intact &= r->buf[i] == 0x5a;
}
} // namespace

TEST_CASE("cuMemsetD16/D32 write whole elements and want them aligned", "[sim][streams]") {
    init_sim();
    CUdeviceptr a = 0;
    REQUIRE(cuMemAlloc_v2(&a, 64) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD8_v2(a, 0, 64) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD32_v2(a, 0x11223344u, 3) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD16Async(a + 16, 0xabcd, 2, nullptr) == CUDA_SUCCESS);
    REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);
    std::array<unsigned char, 24> out{};
    REQUIRE(cuMemcpyDtoH_v2(out.data(), a, out.size()) == CUDA_SUCCESS);
    const std::array<unsigned char, 24> want{0x44, 0x33, 0x22, 0x11, 0x44, 0x33, 0x22, 0x11, 0x44, 0x33, 0x22, 0x11,
                                             0,    0,    0,    0,    0xcd, 0xab, 0xcd, 0xab, 0,    0,    0,    0};
    CHECK(out == want);
    CHECK(cuMemsetD32_v2(a + 2, 1, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemsetD16_v2(a + 1, 1, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemsetD32_v2(a, 1, 17) == CUDA_ERROR_INVALID_VALUE); // 68 bytes past a 64-byte block
    REQUIRE(cuMemFree_v2(a) == CUDA_SUCCESS);
}

TEST_CASE("cuMemFree_v2 waits for queued work; cuMemFreeAsync is stream-ordered", "[sim][streams]") {
    init_sim();
    CUstream s = nullptr;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUdeviceptr a = 0;
    REQUIRE(cuMemAlloc_v2(&a, 1 * kMiB) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD8_v2(a, 0x5a, kMiB) == CUDA_SUCCESS);
    Reader r{reinterpret_cast<unsigned char*>(a), kMiB};
    REQUIRE(cuLaunchHostFunc(s, read_later, &r) == CUDA_SUCCESS);
    REQUIRE(cuMemFree_v2(a) == CUDA_SUCCESS); // must not return (and unmap) before the reader ran
    CHECK(r.intact);

    const long long used0 = simcuda_stat("bytes_in_use");
    CUdeviceptr b = 0;
    REQUIRE(cuMemAllocAsync(&b, 2 * kMiB, s) == CUDA_SUCCESS);
    CHECK(simcuda_stat("bytes_in_use") == used0 + 2 * static_cast<long long>(kMiB));
    Probe hold{80, -1, -1};
    REQUIRE(cuLaunchHostFunc(s, probe_fn, &hold) == CUDA_SUCCESS);
    REQUIRE(cuMemFreeAsync(b, s) == CUDA_SUCCESS);
    CHECK(simcuda_stat("bytes_in_use") == used0 + 2 * static_cast<long long>(kMiB)); // not yet
    CHECK(cuMemFreeAsync(b, s) == CUDA_ERROR_INVALID_VALUE);                         // already queued
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(simcuda_stat("bytes_in_use") == used0);
    REQUIRE(cuStreamDestroy_v2(s) == CUDA_SUCCESS);
}

TEST_CASE("VMM: create, reserve, map, access, unmap, release", "[sim][vmm]") {
    init_sim();
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    REQUIRE(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    CHECK(gran == 2 * kMiB);
    const long long used0 = simcuda_stat("bytes_in_use");
    CUmemGenericAllocationHandle h = 0;
    CHECK(cuMemCreate(&h, kMiB, &prop, 0) == CUDA_ERROR_INVALID_VALUE); // not a granularity multiple
    REQUIRE(cuMemCreate(&h, 2 * kMiB, &prop, 0) == CUDA_SUCCESS);
    CHECK(simcuda_stat("bytes_in_use") == used0 + 2 * static_cast<long long>(kMiB));
    CUdeviceptr va = 0;
    REQUIRE(cuMemAddressReserve(&va, 4 * kMiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(va % (2 * kMiB) == 0);
    REQUIRE(cuMemMap(va + 2 * kMiB, 2 * kMiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va + 2 * kMiB, 2 * kMiB, 0, h, 0) == CUDA_ERROR_ALREADY_MAPPED);
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    REQUIRE(cuMemSetAccess(va + 2 * kMiB, 2 * kMiB, &acc, 1) == CUDA_SUCCESS);
    CHECK(cuMemSetAccess(va, 4 * kMiB, &acc, 1) == CUDA_ERROR_INVALID_VALUE); // first half unmapped
    REQUIRE(cuMemsetD8_v2(va + 2 * kMiB, 7, 2 * kMiB) == CUDA_SUCCESS);
    CHECK(reinterpret_cast<unsigned char*>(va)[2 * kMiB + 12345] == 7);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS); // still mapped: memory stays until the unmap
    CHECK(simcuda_stat("bytes_in_use") == used0 + 2 * static_cast<long long>(kMiB));
    REQUIRE(cuMemUnmap(va + 2 * kMiB, 2 * kMiB) == CUDA_SUCCESS);
    CHECK(simcuda_stat("bytes_in_use") == used0);
    REQUIRE(cuMemAddressFree(va, 4 * kMiB) == CUDA_SUCCESS);
}

TEST_CASE("pointer queries and IPC describe the containing allocation", "[sim][memory]") {
    init_sim();
    CUdeviceptr a = 0, a2 = 0;
    REQUIRE(cuMemAlloc_v2(&a, 3 * kMiB) == CUDA_SUCCESS);
    REQUIRE(cuMemAlloc_v2(&a2, 1024) == CUDA_SUCCESS);
    CUdeviceptr start = 0;
    size_t size = 0;
    unsigned long long id1 = 0, id2 = 0;
    REQUIRE(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 4096) == CUDA_SUCCESS);
    REQUIRE(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 4096) == CUDA_SUCCESS);
    REQUIRE(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a) == CUDA_SUCCESS);
    REQUIRE(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, a2) == CUDA_SUCCESS);
    CHECK(start == a);
    CHECK(size == 3 * kMiB);
    CHECK(id1 != id2);
    CUdeviceptr base = 0;
    REQUIRE(cuMemGetAddressRange_v2(&base, &size, a + 100) == CUDA_SUCCESS);
    CHECK(base == a);
    CUipcMemHandle h1{}, h2{};
    REQUIRE(cuIpcGetMemHandle(&h1, a) == CUDA_SUCCESS);
    REQUIRE(cuIpcGetMemHandle(&h2, a + 8192) == CUDA_SUCCESS); // interior: same allocation's handle
    CHECK(std::memcmp(&h1, &h2, sizeof h1) == 0);
    std::uint64_t encoded = 0;
    std::memcpy(&encoded, h1.reserved, sizeof encoded);
    CHECK(encoded == a);
    REQUIRE(cuMemFree_v2(a) == CUDA_SUCCESS);
    REQUIRE(cuMemFree_v2(a2) == CUDA_SUCCESS);
    CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("runtime reaches the driver through cuGetProcAddress and maps error codes", "[sim][runtime]") {
    init_sim();
    const long long allocs0 = simcuda_stat("cuMemAlloc_v2");
    const long long frees0 = simcuda_stat("cuMemFree_v2");
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, 1000) == cudaSuccess);
    CHECK(simcuda_stat("cuMemAlloc_v2") == allocs0 + 1);
    REQUIRE(cudaFree(p) == cudaSuccess);
    CHECK(cudaFree(nullptr) == cudaSuccess); // no driver call
    CHECK(simcuda_stat("cuMemFree_v2") == frees0 + 1);
    CHECK(cudaMalloc(&p, 65 * kMiB) == cudaErrorMemoryAllocation); // CUDA_ERROR_OUT_OF_MEMORY -> 2
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
    CHECK(simcuda_stat("cuGetProcAddress_v2") >= 1); // the runtime's dlsym'd entry
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult st{};
    REQUIRE(cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn, 11020, cudaEnablePerThreadDefaultStream, &st) ==
            cudaSuccess);
    CHECK(st == cudaDriverEntryPointSuccess);
    CHECK(fn == sim_symbol("cuMemAllocAsync_ptsz"));
    size_t f = 0, t = 0;
    REQUIRE(cudaMemGetInfo(&f, &t) == cudaSuccess);
    CHECK(t == 64 * kMiB);
}

TEST_CASE("global-mode capture forbids cuMemAlloc and invalidates the capture", "[sim][capture]") {
    init_sim();
    CUstream s = nullptr;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    REQUIRE(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    CUstreamCaptureStatus cs{};
    REQUIRE(cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS);
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUdeviceptr d = 0;
    CHECK(cuMemAlloc_v2(&d, 1024) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUgraph g = nullptr;
    CHECK(cuStreamEndCapture(s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(g == nullptr);
    REQUIRE(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    REQUIRE(cuMemAlloc_v2(&d, 1024) == CUDA_SUCCESS); // relaxed mode allows it
    REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
    CHECK(g != nullptr);
    CHECK(cuGraphDestroy(g) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(nullptr) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuMemFree_v2(d) == CUDA_SUCCESS);
    REQUIRE(cuStreamDestroy_v2(s) == CUDA_SUCCESS);
}

TEST_CASE("capture into an existing graph hands that graph back", "[sim][capture]") {
    init_sim();
    CUstream s = nullptr;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUgraph g = nullptr;
    REQUIRE(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
    REQUIRE(g != nullptr);
    CHECK(cuStreamBeginCaptureToGraph(s, nullptr, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_RELAXED) ==
          CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    CUstreamCaptureStatus cs{};
    REQUIRE(cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS);
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(cuStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_RELAXED) ==
          CUDA_ERROR_ILLEGAL_STATE); // already capturing
    CUgraph back = nullptr;
    REQUIRE(cuStreamEndCapture(s, &back) == CUDA_SUCCESS);
    CHECK(back == g);
    // The next plain capture makes a graph of its own again.
    REQUIRE(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    CUgraph fresh = nullptr;
    REQUIRE(cuStreamEndCapture(s, &fresh) == CUDA_SUCCESS);
    CHECK(fresh != nullptr);
    CHECK(fresh != g);
    CHECK(cuGraphDestroy(fresh) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(g) == CUDA_SUCCESS);
    REQUIRE(cuStreamDestroy_v2(s) == CUDA_SUCCESS);
}

TEST_CASE("destroying a context destroys its events, as the real driver does", "[sim][events]") {
    init_sim();
    CUcontext mine = nullptr;
    REQUIRE(cuCtxCreate_v2(&mine, 0, 0) == CUDA_SUCCESS); // also makes it current
    CUevent e = nullptr, spare = nullptr;
    REQUIRE(cuEventCreate(&e, 0) == CUDA_SUCCESS);
    REQUIRE(cuEventCreate(&spare, 0) == CUDA_SUCCESS);
    REQUIRE(cuEventRecord(e, nullptr) == CUDA_SUCCESS);
    REQUIRE(cuEventSynchronize(e) == CUDA_SUCCESS);
    REQUIRE(cuEventDestroy_v2(spare) == CUDA_SUCCESS);
    // Another context's event survives the teardown.
    init_sim();
    CUevent other = nullptr;
    REQUIRE(cuEventCreate(&other, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxDestroy_v2(mine) == CUDA_SUCCESS);
    CHECK(cuEventQuery(e) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuEventDestroy_v2(e) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuEventQuery(other) == CUDA_SUCCESS);
    CHECK(cuEventDestroy_v2(other) == CUDA_SUCCESS);
}
