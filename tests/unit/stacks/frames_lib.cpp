// SPDX-License-Identifier: MIT
// A module for test_backtrace.cpp, built twice with a different frame size (FRAME_BYTES): the same
// code at the same offsets, but another distance from sp to the caller's frame. Loaded, unloaded
// and the other one loaded at the same address, it is code at a reused address with other rules.
#include <cstddef>

extern "C" __attribute__((visibility("default"), noinline)) int frames_lib_call(int (*cb)(void*), void* arg) {
    volatile char pad[FRAME_BYTES];
    pad[0] = 1;
    const int r = cb(arg);
    asm volatile("" ::"r"(pad) : "memory");
    return r + pad[0];
}
