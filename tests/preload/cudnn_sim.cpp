// SPDX-License-Identifier: MIT
// Stands in for cuDNN's cudnnCreate: a library (its file name starts with "libcudnn") that makes a
// stream for its own use inside its handle-creation call. The profiler must not count it as the
// program's second order of work (core/stream_origin.hpp).
#include <cuda_runtime_api.h>

extern "C" __attribute__((visibility("default"))) int cudnn_sim_create(void** handle) {
    cudaStream_t internal = nullptr;
    if (cudaStreamCreateWithFlags(&internal, cudaStreamNonBlocking) != cudaSuccess)
        return 1;
    *handle = internal;
    return 0;
}
