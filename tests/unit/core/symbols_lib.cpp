// SPDX-License-Identifier: MIT
// Exported functions for test_symbol_ranges: two whose names a workspace check accepts, two it
// does not, and a second name for one of the latter that it accepts (an alias).
#include <cstdint>

namespace {
volatile std::uint64_t g_sink;
inline void work(int n) {
    for (int i = 0; i < n; ++i)
        g_sink = g_sink * 31 + static_cast<std::uint64_t>(i);
}
} // namespace

extern "C" {
__attribute__((visibility("default"), noinline)) void symbols_lib_getWorkspaceSize(int n) {
    work(n);
}
__attribute__((visibility("default"), noinline)) void symbols_lib_plain_before(int n) {
    work(n + 1);
    work(n * 3);
}
__attribute__((visibility("default"), noinline)) void symbols_lib_getBlasHandle(int n) {
    work(n + 2);
}
__attribute__((visibility("default"), noinline)) void symbols_lib_plain_after(int n) {
    work(n + 3);
    work(n * 5);
}
__attribute__((visibility("default"), noinline)) void symbols_lib_plain_aliased(int n) {
    work(n + 4);
}
__attribute__((visibility("default"), alias("symbols_lib_plain_aliased"), nothrow)) void
symbols_lib_aliasWorkspace(int n);
}
