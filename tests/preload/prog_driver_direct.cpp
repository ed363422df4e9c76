// SPDX-License-Identifier: MIT
// Driver API through PLT calls into libcuda.so.1 (linked with -lcuda): the export door.
#include "common.hpp"

#include <cuda.h>

#include <cstring>

int main() {
    MUST(cuInit(0));
    CUdevice dev;
    MUST(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    CUdeviceptr a = 0, b = 0, p = 0;
    size_t pitch = 0;
    MUST(cuMemAlloc_v2(&a, 1000));
    MUST(cuMemAlloc_v2(&b, 3 * kMiB));
    MUST(cuMemAllocPitch_v2(&p, &pitch, 1000, 3, 4));
    put("pitch", static_cast<long long>(pitch));
    MUST(cuMemsetD8_v2(a, 1, 1000));
    MUST(cuMemsetD8_v2(b, 2, 3 * kMiB));
    MUST(cuMemsetD8_v2(p, 3, pitch * 3));
    unsigned char h[1000];
    MUST(cuMemcpyDtoH_v2(h, a, sizeof h));
    for (unsigned char x : h)
        EXPECT(x == 1);
    MUST(cuMemFree_v2(a));
    MUST(cuMemFree_v2(b));
    MUST(cuMemFree_v2(p));
    put("program_mallocs", 3);
    return 0;
}
