// SPDX-License-Identifier: MIT
// Simulated CUDA runtime (libcudart.so.13 and libcudart_static.a): reaches the driver exactly the way
// the real cudart does, dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2") once, then every
// function by base name and ABI version through the "cuGetProcAddress" pointer it returns.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#define RT_EXPORT __attribute__((visibility("default")))

namespace gpumemprof::sim::rt {

namespace {

// name, ABI version: the PFN_<name>_v<version> type is the member's type.
// clang-format off
#define SIM_RT_DRIVER_FUNCS(X) \
    X(cuInit, 2000) \
    X(cuDriverGetVersion, 2020) \
    X(cuDeviceGet, 2000) \
    X(cuDeviceGetCount, 2000) \
    X(cuDevicePrimaryCtxRetain, 7000) \
    X(cuDevicePrimaryCtxReset, 11000) \
    X(cuCtxGetCurrent, 4000) \
    X(cuCtxSetCurrent, 4000) \
    X(cuCtxGetDevice, 2000) \
    X(cuCtxSynchronize, 2000) \
    X(cuMemAlloc, 3020) \
    X(cuMemFree, 3020) \
    X(cuMemAllocPitch, 3020) \
    X(cuMemAllocManaged, 6000) \
    X(cuMemAllocHost, 3020) \
    X(cuMemHostAlloc, 2020) \
    X(cuMemFreeHost, 2000) \
    X(cuMemAllocAsync, 11020) \
    X(cuMemFreeAsync, 11020) \
    X(cuMemGetInfo, 3020) \
    X(cuStreamCreate, 2000) \
    X(cuStreamDestroy, 4000) \
    X(cuStreamSynchronize, 2000) \
    X(cuStreamQuery, 2000) \
    X(cuMemcpyAsync, 4000) \
    X(cuMemcpyHtoD, 3020) \
    X(cuMemcpyDtoH, 3020) \
    X(cuMemcpyDtoD, 3020) \
    X(cuMemsetD8, 3020) \
    X(cuMemsetD8Async, 3020) \
    X(cuLaunchHostFunc, 10000) \
    X(cuEventCreate, 2000) \
    X(cuEventRecord, 2000) \
    X(cuEventSynchronize, 2000) \
    X(cuEventQuery, 2000) \
    X(cuEventDestroy, 4000) \
    X(cuStreamBeginCapture, 10010) \
    X(cuStreamEndCapture, 10000) \
    X(cuStreamIsCapturing, 10000) \
    X(cuIpcGetMemHandle, 4010) \
    X(cuPointerGetAttributes, 7000) \
    X(cuGraphDestroy, 10000)
// clang-format on

struct Driver {
#define X(name, ver) PFN_##name##_v##ver name = nullptr;
    SIM_RT_DRIVER_FUNCS(X)
#undef X
};

Driver g_drv;
PFN_cuGetProcAddress_v12000 g_get_proc = nullptr; // the saved "cuGetProcAddress" (12000) pointer
cudaError_t g_init_error = cudaSuccess;
std::once_flag g_init_once;
std::mutex g_primary_mu;
CUcontext g_primary[64] = {};

thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t from_driver(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
    case CUDA_ERROR_ILLEGAL_ADDRESS: return cudaErrorIllegalAddress;
    case CUDA_ERROR_ASSERT: return cudaErrorAssert;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDA_ERROR_ALREADY_MAPPED: return cudaErrorAlreadyMapped;
    case CUDA_ERROR_ILLEGAL_STATE: return cudaErrorIllegalState;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return cudaErrorStreamCaptureUnsupported;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return cudaErrorStreamCaptureInvalidated;
    default: return cudaErrorUnknown;
    }
}

/// Every failing call leaves its code for cudaGetLastError.
cudaError_t record(cudaError_t e) {
    if (e != cudaSuccess)
        t_last_error = e;
    return e;
}
cudaError_t record(CUresult r) {
    return record(from_driver(r));
}

void load_driver() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        g_init_error = cudaErrorInsufficientDriver;
        return;
    }
    auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
    if (!gpa) {
        g_init_error = cudaErrorInsufficientDriver;
        return;
    }
    // The same opening sequence as the real runtime: a probe, cuInit, then cuGetProcAddress at
    // both of its ABIs; the 12000 one is kept for every later lookup.
    void* p = nullptr;
    CUdriverProcAddressQueryResult st;
    gpa("", &p, 0, 0, &st);
    gpa("cuInit", &p, 2000, 0, &st);
    gpa("cuGetProcAddress", &p, 11030, 0, &st);
    p = nullptr;
    if (gpa("cuGetProcAddress", &p, 12000, 0, &st) != CUDA_SUCCESS || !p) {
        g_init_error = cudaErrorInsufficientDriver;
        return;
    }
    g_get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(p);
#define X(name, ver)                                                                                                   \
    p = nullptr;                                                                                                       \
    g_get_proc(#name, &p, ver, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st);                                                \
    g_drv.name = reinterpret_cast<PFN_##name##_v##ver>(p);
    SIM_RT_DRIVER_FUNCS(X)
#undef X
    if (!g_drv.cuInit || !g_drv.cuMemAlloc || !g_drv.cuCtxGetCurrent) {
        g_init_error = cudaErrorInsufficientDriver;
        return;
    }
    g_init_error = from_driver(g_drv.cuInit(0));
}

cudaError_t ensure_driver() {
    std::call_once(g_init_once, load_driver);
    return g_init_error;
}

CUresult retain_primary(int dev, CUcontext* out) {
    std::lock_guard lk(g_primary_mu);
    if (!g_primary[dev]) {
        CUdevice d = 0;
        if (CUresult r = g_drv.cuDeviceGet(&d, dev))
            return r;
        if (CUresult r = g_drv.cuDevicePrimaryCtxRetain(&g_primary[dev], d))
            return r;
    }
    *out = g_primary[dev];
    return CUDA_SUCCESS;
}

/// Lazy primary-context setup of the calling thread: a context the program made current through
/// the driver API is respected; otherwise the primary context of the thread's device.
cudaError_t ensure_context() {
    if (cudaError_t e = ensure_driver())
        return e;
    CUcontext c = nullptr;
    if (CUresult r = g_drv.cuCtxGetCurrent(&c))
        return from_driver(r);
    if (c)
        return cudaSuccess;
    if (CUresult r = retain_primary(t_device, &c))
        return from_driver(r);
    return from_driver(g_drv.cuCtxSetCurrent(c));
}

CUdeviceptr dp(const void* p) {
    return reinterpret_cast<CUdeviceptr>(p);
}

} // namespace

} // namespace gpumemprof::sim::rt

using namespace gpumemprof::sim::rt;

#define RT_CTX()                                                                                                       \
    do {                                                                                                               \
        if (cudaError_t e_ = ensure_context())                                                                         \
            return record(e_);                                                                                         \
    } while (0)

// ---- device management ------------------------------------------------------------------------

RT_EXPORT cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
    if (cudaError_t e = ensure_driver())
        return record(e);
    return record(g_drv.cuDeviceGetCount(count));
}

RT_EXPORT cudaError_t CUDARTAPI cudaSetDevice(int device) {
    if (cudaError_t e = ensure_driver())
        return record(e);
    int n = 0;
    if (CUresult r = g_drv.cuDeviceGetCount(&n))
        return record(r);
    if (device < 0 || device >= n || device >= 64)
        return record(cudaErrorInvalidDevice);
    t_device = device;
    CUcontext c = nullptr;
    if (CUresult r = retain_primary(device, &c))
        return record(r);
    return record(g_drv.cuCtxSetCurrent(c));
}

RT_EXPORT cudaError_t CUDARTAPI cudaGetDevice(int* device) {
    if (!device)
        return record(cudaErrorInvalidValue);
    if (cudaError_t e = ensure_driver())
        return record(e);
    CUcontext c = nullptr;
    g_drv.cuCtxGetCurrent(&c);
    if (c)
        return record(g_drv.cuCtxGetDevice(device));
    *device = t_device;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
    RT_CTX();
    return record(g_drv.cuCtxSynchronize());
}

RT_EXPORT cudaError_t CUDARTAPI cudaDeviceReset(void) {
    RT_CTX();
    int dev = 0;
    if (cudaError_t e = cudaGetDevice(&dev))
        return e;
    return record(g_drv.cuDevicePrimaryCtxReset(dev));
}

RT_EXPORT cudaError_t CUDARTAPI cudaDriverGetVersion(int* v) {
    if (cudaError_t e = ensure_driver())
        return record(e);
    return record(g_drv.cuDriverGetVersion(v));
}

RT_EXPORT cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* v) {
    if (!v)
        return record(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

// ---- memory -----------------------------------------------------------------------------------

RT_EXPORT cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
    if (!devPtr)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    if (size == 0) { // the runtime answers a 0-byte request itself, without a driver call
        *devPtr = nullptr;
        return cudaSuccess;
    }
    CUdeviceptr d = 0;
    if (CUresult r = g_drv.cuMemAlloc(&d, size))
        return record(r);
    *devPtr = reinterpret_cast<void*>(d);
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI cudaFree(void* devPtr) {
    RT_CTX(); // cudaFree(NULL) is the classic "initialise the context" idiom
    if (!devPtr)
        return cudaSuccess;
    return record(g_drv.cuMemFree(dp(devPtr)));
}

RT_EXPORT cudaError_t CUDARTAPI cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
    if (!devPtr || !pitch)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    CUdeviceptr d = 0;
    if (CUresult r = g_drv.cuMemAllocPitch(&d, pitch, width, height, 4))
        return record(r);
    *devPtr = reinterpret_cast<void*>(d);
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
    if (!devPtr)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    CUdeviceptr d = 0;
    if (CUresult r = g_drv.cuMemAllocManaged(&d, size, flags))
        return record(r);
    *devPtr = reinterpret_cast<void*>(d);
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) {
    if (!ptr)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    if (size == 0) {
        *ptr = nullptr;
        return cudaSuccess;
    }
    return record(g_drv.cuMemAllocHost(ptr, size));
}

RT_EXPORT cudaError_t CUDARTAPI cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
    if (!pHost)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    if (size == 0) {
        *pHost = nullptr;
        return cudaSuccess;
    }
    return record(g_drv.cuMemHostAlloc(pHost, size, flags));
}

RT_EXPORT cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
    RT_CTX();
    if (!ptr)
        return cudaSuccess;
    return record(g_drv.cuMemFreeHost(ptr));
}

RT_EXPORT cudaError_t CUDARTAPI cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
    if (!devPtr)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    CUdeviceptr d = 0;
    if (CUresult r = g_drv.cuMemAllocAsync(&d, size, hStream))
        return record(r);
    *devPtr = reinterpret_cast<void*>(d);
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
    RT_CTX();
    return record(g_drv.cuMemFreeAsync(dp(devPtr), hStream));
}

RT_EXPORT cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free, size_t* total) {
    RT_CTX();
    return record(g_drv.cuMemGetInfo(free, total));
}

RT_EXPORT cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
    RT_CTX();
    switch (kind) {
    case cudaMemcpyHostToHost: std::memmove(dst, src, count); return cudaSuccess;
    case cudaMemcpyHostToDevice: return record(g_drv.cuMemcpyHtoD(dp(dst), src, count));
    case cudaMemcpyDeviceToHost: return record(g_drv.cuMemcpyDtoH(dst, dp(src), count));
    case cudaMemcpyDeviceToDevice: return record(g_drv.cuMemcpyDtoD(dp(dst), dp(src), count));
    case cudaMemcpyDefault:
        if (CUresult r = g_drv.cuMemcpyAsync(dp(dst), dp(src), count, nullptr))
            return record(r);
        return record(g_drv.cuStreamSynchronize(nullptr));
    }
    return record(cudaErrorInvalidMemcpyDirection);
}

RT_EXPORT cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                                cudaStream_t stream) {
    RT_CTX();
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return record(cudaErrorInvalidMemcpyDirection);
    return record(g_drv.cuMemcpyAsync(dp(dst), dp(src), count, stream));
}

RT_EXPORT cudaError_t CUDARTAPI cudaMemset(void* devPtr, int value, size_t count) {
    RT_CTX();
    return record(g_drv.cuMemsetD8(dp(devPtr), static_cast<unsigned char>(value), count));
}

RT_EXPORT cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
    RT_CTX();
    return record(g_drv.cuMemsetD8Async(dp(devPtr), static_cast<unsigned char>(value), count, stream));
}

RT_EXPORT cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
    if (!handle)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(CUipcMemHandle));
    return record(g_drv.cuIpcGetMemHandle(reinterpret_cast<CUipcMemHandle*>(handle), dp(devPtr)));
}

RT_EXPORT cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
    if (!attributes)
        return record(cudaErrorInvalidValue);
    RT_CTX();
    unsigned mem_type = 0;
    int ordinal = -2;
    CUdeviceptr dev_ptr = 0;
    void* host_ptr = nullptr;
    bool managed = false;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void* data[] = {&mem_type, &ordinal, &dev_ptr, &host_ptr, &managed};
    if (CUresult r = g_drv.cuPointerGetAttributes(5, attrs, data, dp(ptr)))
        return record(r);
    if (mem_type == 0) {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
        attributes->devicePointer = nullptr;
        attributes->hostPointer = const_cast<void*>(ptr);
        return cudaSuccess;
    }
    attributes->type =
        managed ? cudaMemoryTypeManaged : (mem_type == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost : cudaMemoryTypeDevice);
    attributes->device = ordinal;
    attributes->devicePointer = reinterpret_cast<void*>(dev_ptr);
    attributes->hostPointer = host_ptr;
    return cudaSuccess;
}

// ---- streams, events, host functions, capture -------------------------------------------------

RT_EXPORT cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) {
    RT_CTX();
    return record(g_drv.cuStreamCreate(pStream, CU_STREAM_DEFAULT));
}

RT_EXPORT cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
    RT_CTX();
    return record(g_drv.cuStreamCreate(pStream, flags));
}

RT_EXPORT cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
    RT_CTX();
    return record(g_drv.cuStreamDestroy(stream));
}

RT_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
    RT_CTX();
    return record(g_drv.cuStreamSynchronize(stream));
}

RT_EXPORT cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) {
    RT_CTX();
    return record(g_drv.cuStreamQuery(stream));
}

RT_EXPORT cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
    RT_CTX();
    return record(g_drv.cuLaunchHostFunc(stream, fn, userData));
}

RT_EXPORT cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
    RT_CTX();
    return record(g_drv.cuEventCreate(event, CU_EVENT_DEFAULT));
}

RT_EXPORT cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
    RT_CTX();
    return record(g_drv.cuEventCreate(event, flags));
}

RT_EXPORT cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    RT_CTX();
    return record(g_drv.cuEventRecord(event, stream));
}

RT_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
    RT_CTX();
    return record(g_drv.cuEventSynchronize(event));
}

RT_EXPORT cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
    RT_CTX();
    return record(g_drv.cuEventQuery(event));
}

RT_EXPORT cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
    RT_CTX();
    return record(g_drv.cuEventDestroy(event));
}

RT_EXPORT cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    RT_CTX();
    return record(g_drv.cuStreamBeginCapture(stream, static_cast<CUstreamCaptureMode>(mode)));
}

RT_EXPORT cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
    RT_CTX();
    return record(g_drv.cuStreamEndCapture(stream, pGraph));
}

RT_EXPORT cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
    RT_CTX();
    return record(g_drv.cuGraphDestroy(graph));
}

RT_EXPORT cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream,
                                                      enum cudaStreamCaptureStatus* pCaptureStatus) {
    RT_CTX();
    CUstreamCaptureStatus s = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CUresult r = g_drv.cuStreamIsCapturing(stream, &s))
        return record(r);
    if (pCaptureStatus)
        *pCaptureStatus = static_cast<cudaStreamCaptureStatus>(s);
    return cudaSuccess;
}

// ---- driver entry points ----------------------------------------------------------------------

RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                                                 unsigned int cudaVersion, unsigned long long flags,
                                                                 enum cudaDriverEntryPointQueryResult* driverStatus) {
    if (cudaError_t e = ensure_driver())
        return record(e);
    if (!symbol || !funcPtr)
        return record(cudaErrorInvalidValue);
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = g_get_proc(symbol, funcPtr, static_cast<int>(cudaVersion), flags, &st);
    // The enums have the same values (SUCCESS 0, SYMBOL_NOT_FOUND 1, VERSION_NOT_SUFFICIENT 2).
    if (driverStatus)
        *driverStatus = static_cast<cudaDriverEntryPointQueryResult>(st);
    return record(r);
}

RT_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                                        enum cudaDriverEntryPointQueryResult* driverStatus) {
    // The version-less form asks for the ABI of the runtime's own version.
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

// ---- errors -----------------------------------------------------------------------------------

RT_EXPORT cudaError_t CUDARTAPI cudaGetLastError(void) {
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}

RT_EXPORT cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
    return t_last_error;
}

namespace {
struct RtError {
    cudaError_t code;
    const char* name;
    const char* text;
};
constexpr RtError kRtErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorAlreadyMapped, "cudaErrorAlreadyMapped", "resource already mapped"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
} // namespace

RT_EXPORT const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
    for (const auto& e : kRtErrors) {
        if (e.code == error)
            return e.text;
    }
    return "unrecognized error code";
}

RT_EXPORT const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
    for (const auto& e : kRtErrors) {
        if (e.code == error)
            return e.name;
    }
    return "unrecognized error code";
}
