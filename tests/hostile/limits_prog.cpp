// SPDX-License-Identifier: MIT
// Programs that are fair to a library living inside them but leave it little room:
// small stacks (a PTHREAD_STACK_MIN thread, an 8 KiB makecontext coroutine, an
// 8 KiB sigaltstack handler), the stack bytes one allocation costs, and an exit under RLIMIT_AS
// after the heap was filled. Prints key=value lines that run_hostile.py checks.
#include "../preload/common.hpp"

#include <cuda_runtime_api.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <string>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr std::size_t kGuard = 16 * 1024; // painted bytes below each small stack
constexpr unsigned char kPaint = 0xA5;
constexpr int kPerContext = 10; // allocations made in each small context
void* g_kept[3] = {};           // one block kept live by each small context

/// kPerContext allocations of 1 MiB; all but the last freed at once, the last kept in *kept.
void allocate_some(void** kept) {
    void* p[kPerContext] = {};
    for (int i = 0; i < kPerContext; ++i)
        MUST(cudaMalloc(&p[i], kMiB));
    for (int i = 0; i + 1 < kPerContext; ++i)
        MUST(cudaFree(p[i]));
    *kept = p[kPerContext - 1];
}

/// A stack of `size` usable bytes with kGuard painted bytes below it; intact() says whether
/// anything ran below the stack's end.
struct PaintedStack {
    explicit PaintedStack(std::size_t size) : bytes(kGuard + size, kPaint), size(size) {}
    void* base() { return bytes.data() + kGuard; }
    std::size_t untouched_guard() const {
        std::size_t n = 0;
        while (n < kGuard && bytes[n] == kPaint)
            ++n;
        return n;
    }
    bool intact() const { return untouched_guard() == kGuard; }
    std::vector<unsigned char> bytes;
    std::size_t size;
};

void* small_thread(void*) {
    allocate_some(&g_kept[0]);
    return nullptr;
}

ucontext_t g_main_ctx, g_co_ctx;
void coroutine() {
    allocate_some(&g_kept[1]);
}

void on_signal(int) {
    allocate_some(&g_kept[2]);
}

/// A heap check: glibc aborts on a corrupted heap ("double free or corruption").
void churn_heap() {
    std::vector<void*> v;
    for (int i = 0; i < 2000; ++i)
        v.push_back(std::malloc(static_cast<std::size_t>(16 + (i * 37) % 4000)));
    for (void* p : v)
        std::free(p);
}

int small_stacks() {
    void* warm = nullptr; // the profiler starts on a normal stack, as in a real program
    MUST(cudaMalloc(&warm, kMiB));
    MUST(cudaFree(warm));

    // A PTHREAD_STACK_MIN thread (glibc's guard page below it catches an overflow).
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    EXPECT(pthread_attr_setstacksize(&attr, 16384) == 0);
    pthread_t t;
    EXPECT(pthread_create(&t, &attr, small_thread, nullptr) == 0);
    EXPECT(pthread_join(t, nullptr) == 0);
    pthread_attr_destroy(&attr);
    put("thread_done", 1);

    // An 8 KiB makecontext coroutine.
    PaintedStack co(8192);
    getcontext(&g_co_ctx);
    g_co_ctx.uc_stack.ss_sp = co.base();
    g_co_ctx.uc_stack.ss_size = co.size;
    g_co_ctx.uc_link = &g_main_ctx;
    makecontext(&g_co_ctx, coroutine, 0);
    EXPECT(swapcontext(&g_main_ctx, &g_co_ctx) == 0);
    put("coroutine_done", 1);
    put("coroutine_overflow_bytes", static_cast<long long>(kGuard - co.untouched_guard()));

    // An 8 KiB alternate signal stack; the handler runs at a point where the program holds no lock.
    PaintedStack alt(8192);
    stack_t ss{};
    ss.ss_sp = alt.base();
    ss.ss_size = alt.size;
    EXPECT(sigaltstack(&ss, nullptr) == 0);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGUSR1, &sa, nullptr) == 0);
    EXPECT(raise(SIGUSR1) == 0);
    ss.ss_flags = SS_DISABLE;
    EXPECT(sigaltstack(&ss, nullptr) == 0);
    put("sigaltstack_done", 1);
    put("sigaltstack_overflow_bytes", static_cast<long long>(kGuard - alt.untouched_guard()));

    churn_heap();
    put("heap_ok", 1);
    for (void* p : g_kept)
        put("kept_nonnull", p != nullptr);
    return 0; // three blocks of 1 MiB stay live at exit
}

// ---- stack bytes of one allocation ------------------------------------------------------------
constexpr std::size_t kMeasureStack = 1 << 20;
unsigned char* g_measure_lo = nullptr;

/// Paints [lo, sp - 512) of the calling thread's stack, one byte at a time (no call below sp).
__attribute__((noinline)) void paint_below_me() {
    volatile unsigned char* p = g_measure_lo;
    auto* limit = static_cast<unsigned char*>(__builtin_frame_address(0)) - 512;
    for (; p < limit; ++p)
        *p = kPaint;
}

__attribute__((noinline)) void one_alloc_free() {
    void* p = nullptr;
    MUST(cudaMalloc(&p, kMiB));
    MUST(cudaFree(p));
}

void* measure_thread(void* arg) {
    long long* used = static_cast<long long*>(arg);
    for (int i = 0; i < 3; ++i) // warm: first-call set-up is not the cost of an allocation
        one_alloc_free();
    paint_below_me();
    auto* sp = static_cast<unsigned char*>(__builtin_frame_address(0));
    one_alloc_free();
    unsigned char* q = g_measure_lo;
    while (q < sp && *q == kPaint)
        ++q;
    *used = static_cast<long long>(sp - q);
    return nullptr;
}

int stack_use() {
    std::vector<unsigned char> stack(kMeasureStack + 4096);
    auto base = (reinterpret_cast<std::uintptr_t>(stack.data()) + 4095) & ~std::uintptr_t{4095};
    g_measure_lo = reinterpret_cast<unsigned char*>(base);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    EXPECT(pthread_attr_setstack(&attr, g_measure_lo, kMeasureStack) == 0);
    long long used = -1;
    pthread_t t;
    EXPECT(pthread_create(&t, &attr, measure_thread, &used) == 0);
    EXPECT(pthread_join(t, nullptr) == 0);
    pthread_attr_destroy(&attr);
    put("stack_bytes", used);
    return 0;
}

// ---- RLIMIT_AS -------------------------------------------------------------------------------
/// Address space in use now (VmSize), in bytes.
long long vm_size() {
    FILE* f = std::fopen("/proc/self/statm", "r");
    long long pages = 0;
    if (f != nullptr) {
        EXPECT(std::fscanf(f, "%lld", &pages) == 1);
        std::fclose(f);
    }
    return pages * sysconf(_SC_PAGESIZE);
}

/// Allocations with stacks, then RLIMIT_AS at VmSize + margin_mib, the heap filled and freed,
/// and exit with status 7 (the report is written under the limit).
int rlimit_as(long long margin_mib) {
    void* live[4] = {};
    for (void*& p : live)
        MUST(cudaMalloc(&p, kMiB));
    rlimit rl{};
    rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(vm_size() + margin_mib * static_cast<long long>(kMiB));
    EXPECT(setrlimit(RLIMIT_AS, &rl) == 0);
    std::vector<void*> heap;
    heap.reserve(1 << 16);
    for (;;) {
        void* p = std::malloc(256 * 1024);
        if (p == nullptr)
            break;
        std::memset(p, 1, 4096);
        heap.push_back(p);
    }
    put("filled_mib", static_cast<long long>(heap.size()) / 4);
    for (void* p : heap)
        std::free(p);
    std::fflush(stdout);
    std::exit(7); // the four blocks stay live: the leak list needs their frames
}

} // namespace

int main(int argc, char** argv) {
    const std::string c = argc > 1 ? argv[1] : "";
    const char* a2 = argc > 2 ? argv[2] : "";
    if (c == "small_stacks")
        return small_stacks();
    if (c == "stack_use")
        return stack_use();
    if (c == "rlimit_as")
        return rlimit_as(std::atoll(a2));
    std::printf("FAIL unknown case %s\n", c.c_str());
    return 2;
}
