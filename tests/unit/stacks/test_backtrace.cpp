// SPDX-License-Identifier: MIT
// stacks/backtrace + frame_rules: the walk with the shared rules gives exactly the frames that
// libunwind's own unwinder gives (unw_backtrace, the reference), for frames with and without a
// frame pointer, dynamic stack (alloca), a realigned stack, a signal handler's frames, a new
// thread, and after the rules were learnt on another thread or forgotten.
#include "stacks/backtrace.hpp"
#include "stacks/frame_rules.hpp"
#include "stacks/unloaded_modules.hpp"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <catch2/catch.hpp>

#include <alloca.h>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <thread>
#include <vector>

using namespace gpumemprof::stacks;

namespace {

struct Both {
    std::vector<std::uintptr_t> ours, reference;
};

/// Both unwinds from the same frame: ours (skip 0: the first entry is in this function's
/// caller... of capture_backtrace, i.e. here) and libunwind's, whose first entry is also here.
__attribute__((noinline)) Both capture_both() {
    Both b;
    std::uintptr_t ips[kMaxFrames];
    const int n = capture_backtrace(ips, kMaxFrames, 0);
    void* raw[kMaxFrames];
    const int m = unw_backtrace(raw, kMaxFrames);
    b.ours.assign(ips, ips + n);
    for (int i = 0; i < m; ++i)
        b.reference.push_back(reinterpret_cast<std::uintptr_t>(raw[i]) - 1);
    asm volatile("" ::: "memory");
    return b;
}

/// x86-64 Linux rt_sigreturn: mov $15, %rax; syscall (the kernel's signal return trampoline).
bool follows_trampoline(std::uintptr_t previous) {
    static const unsigned char seq[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
    return std::memcmp(reinterpret_cast<const void*>(previous + 1), seq, sizeof seq) == 0;
}

/// The two agree from the frame above this one outward (their first entries are two different
/// call sites in capture_both). The one difference: the frame a signal interrupted is given at its
/// exact pc (it is not a return address), where the reference subtracted one like elsewhere.
/// Returns how many such frames there were.
int check_same(const Both& b) {
    REQUIRE(b.ours.size() >= 3);
    REQUIRE(b.ours.size() == b.reference.size());
    int interrupted = 0;
    for (std::size_t i = 1; i < b.ours.size(); ++i) {
        INFO("frame " << i);
        if (follows_trampoline(b.ours[i - 1])) {
            CHECK(b.ours[i] == b.reference[i] + 1);
            ++interrupted;
        } else {
            CHECK(b.ours[i] == b.reference[i]);
        }
    }
    return interrupted;
}

__attribute__((noinline, noipa)) Both through_alloca(int n) {
    volatile char* p = static_cast<volatile char*>(alloca(static_cast<std::size_t>(n)));
    p[0] = 1;
    Both b = capture_both();
    asm volatile("" ::"r"(p) : "memory");
    return b;
}

__attribute__((noinline, noipa)) Both realigned() {
    alignas(128) volatile char buf[256];
    buf[0] = 1;
    Both b = capture_both();
    asm volatile("" ::"r"(buf) : "memory");
    return b;
}

__attribute__((noinline, noipa)) Both descend(int n) {
    if (n == 0)
        return capture_both();
    Both b = n % 3 == 0 ? through_alloca(16 * n) : (n % 3 == 1 ? realigned() : descend(n - 1));
    if (n % 3 != 2)
        b = descend(n - 1);
    asm volatile("" ::: "memory");
    return b;
}

Both g_in_handler;
volatile sig_atomic_t g_handled = 0;
void on_signal(int) {
    g_in_handler = capture_both();
    g_handled = 1;
}

__attribute__((noinline, noipa)) void raise_here() {
    std::raise(SIGUSR2);
    asm volatile("" ::: "memory");
}

} // namespace

TEST_CASE("backtrace: the shared rules give libunwind's frames", "[backtrace]") {
    clear_frame_rules_for_tests();
    check_same(descend(12)); // learnt now
    check_same(descend(12)); // from the table
    const auto s = frame_rule_stats();
    CHECK(s.rules > 0);
    CHECK(s.learnt >= s.rules);
}

TEST_CASE("backtrace: alloca and a realigned stack (frame-pointer rules)", "[backtrace]") {
    check_same(through_alloca(100));
    check_same(through_alloca(5000)); // the same code, another frame size: sp-relative rules would fail
    check_same(realigned());
}

TEST_CASE("backtrace: through a signal handler and the kernel's return frame", "[backtrace]") {
    struct sigaction sa {
    }, old{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    REQUIRE(::sigaction(SIGUSR2, &sa, &old) == 0);
    g_handled = 0;
    raise_here();
    REQUIRE(g_handled == 1);
    ::sigaction(SIGUSR2, &old, nullptr);
    CHECK(check_same(g_in_handler) == 1);
    // The stack goes on past the handler: raise_here is in it.
    const auto here = reinterpret_cast<std::uintptr_t>(&raise_here);
    bool found = false;
    for (std::uintptr_t ip : g_in_handler.ours)
        found = found || (ip > here && ip < here + 64);
    CHECK(found);
}

TEST_CASE("backtrace: a new thread walks with rules learnt on another", "[backtrace]") {
    check_same(descend(6));
    const auto learnt = frame_rule_stats().learnt;
    Both b;
    std::thread([&] { b = descend(6); }).join();
    check_same(b);
    // Only the thread's own outer frames (start_thread, clone) were new.
    CHECK(frame_rule_stats().learnt - learnt <= 6);
}

TEST_CASE("backtrace: depth limit and skip", "[backtrace]") {
    std::uintptr_t all[kMaxFrames], few[4], skipped[kMaxFrames];
    const int n = capture_backtrace(all, kMaxFrames, 0);
    REQUIRE(n > 4);
    REQUIRE(capture_backtrace(few, 4, 0) == 4);
    CHECK(few[1] == all[1]);
    CHECK(few[3] == all[3]);
    const int k = capture_backtrace(skipped, kMaxFrames, 2);
    CHECK(k == n - 2);
    CHECK(skipped[1] == all[3]);
}

namespace {

struct CallbackResult {
    Both both;
};

int capture_in_callback(void* arg) {
    static_cast<CallbackResult*>(arg)->both = capture_both();
    return 0;
}

using LibCall = int (*)(int (*)(void*), void*);

} // namespace

TEST_CASE("backtrace: code at a reused address gets its own rules once the old module is forgotten", "[backtrace]") {
    const char* path_a = std::getenv("FRAMES_LIB_A");
    const char* path_b = std::getenv("FRAMES_LIB_B");
    if (path_a == nullptr || path_b == nullptr) {
        WARN("FRAMES_LIB_A / FRAMES_LIB_B not set (run through meson test)");
        return;
    }
    void* a = ::dlopen(path_a, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(a != nullptr);
    auto call_a = reinterpret_cast<LibCall>(::dlsym(a, "frames_lib_call"));
    REQUIRE(call_a != nullptr);
    CallbackResult ra;
    call_a(capture_in_callback, &ra);
    check_same(ra.both); // the rules for frames_lib_call (400-byte frame) are learnt here
    ModuleRange m;
    REQUIRE(module_of_handle(a, &m));
    REQUIRE(::dlclose(a) == 0);
    note_unloaded(m); // what the library's dlclose hook does

    void* b = ::dlopen(path_b, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(b != nullptr);
    auto call_b = reinterpret_cast<LibCall>(::dlsym(b, "frames_lib_call"));
    REQUIRE(call_b != nullptr);
    // The scenario: the other module's function at the very address of the first one's.
    REQUIRE(reinterpret_cast<void*>(call_b) == reinterpret_cast<void*>(call_a));
    // On a new thread, after flushing libunwind's own caches: libunwind keeps per-thread rules
    // that no dlclose clears, so the reference itself would otherwise be stale here.
    unw_flush_cache(unw_local_addr_space, 0, 0);
    CallbackResult rb;
    std::thread([&] { call_b(capture_in_callback, &rb); }).join();
    check_same(rb.both); // a 3000-byte frame: the old rule would land on the wrong return address
    ::dlclose(b);
}

TEST_CASE("backtrace: a new thread on an old thread's stack memory walks its own frames", "[backtrace]") {
    std::uintptr_t self_a = 0, self_b = 0;
    Both a, b;
    std::thread([&] {
        self_a = reinterpret_cast<std::uintptr_t>(::pthread_self());
        a = descend(7);
    }).join();
    std::thread([&] {
        self_b = reinterpret_cast<std::uintptr_t>(::pthread_self());
        b = through_alloca(300);
    }).join();
    check_same(a);
    check_same(b);
    if (self_a != self_b)
        WARN("the second thread did not get the first one's stack: the reuse was not exercised");
}
