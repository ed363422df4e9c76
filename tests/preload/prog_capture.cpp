// SPDX-License-Identifier: MIT
// A relaxed-mode stream capture is open on one non-blocking stream while another thread frees and
// allocates device memory and works on its own stream. Prints every code (compared with and without
// the preload), then checks that memory freed during the capture is handed out again after it.
#include "common.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <thread>
#include <vector>

int main() {
    void *x = nullptr, *w = nullptr, *scratch = nullptr;
    // Under the pool: x (3 MiB) opens a 20 MiB large segment and w (17 MiB) takes exactly the rest
    // of it; scratch (4 KiB, written by the captured work) opens a 2 MiB small segment.
    MUST(cudaMalloc(&x, 3 * kMiB));
    MUST(cudaMalloc(&w, 17 * kMiB));
    MUST(cudaMalloc(&scratch, 4096));
    MUST(cudaDeviceSynchronize());

    cudaStream_t cap = nullptr;
    MUST(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    put("begin", cudaStreamBeginCapture(cap, cudaStreamCaptureModeRelaxed));
    put("captured_memset", cudaMemsetAsync(scratch, 7, 4096, cap));

    // The other thread, on its own non-blocking stream: free x, allocate y, write y, synchronise.
    // y (20 MiB) finds no free block (x waits for a fence, which cannot be recorded during a
    // capture): the pool asks the device for a new 20 MiB segment while the capture is open.
    int malloc_y = -1, memset_y = -1, sync_y = -1, free_x = -1, stream_create = -1;
    void* y = nullptr;
    std::thread t([&] {
        cudaStream_t s2 = nullptr;
        stream_create = cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
        free_x = cudaFree(x);
        malloc_y = cudaMalloc(&y, 20 * kMiB);
        memset_y = cudaMemsetAsync(y, 9, 20 * kMiB, s2);
        sync_y = cudaStreamSynchronize(s2);
        std::vector<unsigned char> h(20 * kMiB);
        MUST(cudaMemcpy(h.data(), y, h.size(), cudaMemcpyDeviceToHost));
        for (unsigned char c : h)
            EXPECT(c == 9);
        MUST(cudaStreamDestroy(s2));
    });
    t.join();
    put("stream_create", stream_create);
    put("free_x", free_x);
    put("malloc_y", malloc_y);
    put("memset_y", memset_y);
    put("sync_y", sync_y);

    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    put("is_capturing", cudaStreamIsCapturing(cap, &status));
    put("capture_status", status); // 1: active
    cudaGraph_t graph = nullptr;
    put("end", cudaStreamEndCapture(cap, &graph));
    put("graph", graph != nullptr);
    put("last_error", cudaGetLastError());
    if (graph != nullptr)
        MUST(cudaGraphDestroy(graph));

    // After the capture: freeing w lets the pool fence what was freed meanwhile (x); once the
    // device is idle both are free and merge into the whole 20 MiB segment, the only free large
    // block (y fills its own segment), so a 3 MiB request is served at its base: x again.
    MUST(cudaFree(w));
    MUST(cudaDeviceSynchronize());
    void* z = nullptr;
    MUST(cudaMalloc(&z, 3 * kMiB));
    put("z_reuses_x", z == x);
    MUST(cudaFree(z));
    MUST(cudaFree(y));
    MUST(cudaFree(scratch));
    MUST(cudaStreamDestroy(cap));
    return 0;
}
