// SPDX-License-Identifier: MIT
// A queued host function still reads buffer A when the program frees A and allocates B of the same
// size, which another stream overwrites: the reader must always see A's pattern (cudaFree's
// implicit synchronisation, which the pool must preserve).
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

namespace {
struct Reader {
    const unsigned char* buf;
    size_t n;
    bool intact;
};
void read_later(void* arg) {
    auto* r = static_cast<Reader*>(arg);
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // a long "kernel"
    r->intact = true;
    for (size_t i = 0; i < r->n; ++i)
        r->intact &= r->buf[i] == 0xa5;
}
} // namespace

int main() {
    cudaStream_t reader_stream, writer_stream;
    MUST(cudaStreamCreateWithFlags(&reader_stream, cudaStreamNonBlocking));
    MUST(cudaStreamCreateWithFlags(&writer_stream, cudaStreamNonBlocking));
    int corrupt = 0, same_address = 0;
    for (int i = 0; i < 20; ++i) {
        void* a = nullptr;
        MUST(cudaMalloc(&a, kMiB));
        MUST(cudaMemset(a, 0xa5, kMiB));
        Reader r{static_cast<const unsigned char*>(a), kMiB, false};
        MUST(cudaLaunchHostFunc(reader_stream, read_later, &r));
        MUST(cudaFree(a));
        void* b = nullptr;
        MUST(cudaMalloc(&b, kMiB));
        same_address += a == b;
        MUST(cudaMemsetAsync(b, 0x00, kMiB, writer_stream));
        MUST(cudaDeviceSynchronize());
        corrupt += !r.intact;
        MUST(cudaFree(b));
    }
    put("corrupt", corrupt);
    put("same_address", same_address);
    MUST(cudaStreamDestroy(reader_stream));
    MUST(cudaStreamDestroy(writer_stream));
    return 0;
}
