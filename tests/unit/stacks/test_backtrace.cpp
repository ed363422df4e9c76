// SPDX-License-Identifier: MIT
// stacks/backtrace + frame_rules: the walk with the shared rules gives exactly the frames that
// libunwind's own unwinder gives (unw_backtrace, the reference), for frames with and without a
// frame pointer, dynamic stack (alloca), a realigned stack, a signal handler's frames, a new
// thread, and after the rules were learnt on another thread or forgotten; and a walk that stops
// where it meets the thread's previous walk (the shadow) gives them too, wherever the two
// stacks differ only outside the frames where they meet.
#include "stacks/backtrace.hpp"
#include "stacks/frame_rules.hpp"
#include "stacks/unloaded_modules.hpp"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <alloca.h>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gpumemprof::stacks;

namespace {

struct Both {
    std::vector<std::uintptr_t> ours, reference;
    int from_shadow = 0;      ///< frames of ours copied from the thread's previous walk
    std::uint64_t serial = 0; ///< WalkInfo::serial
};

/// Every walk of a thread through capture_both: a serial that stays must mean the same frames as
/// that thread's walk before (checked in every test below that walks through it).
thread_local std::vector<std::uintptr_t> tl_latest_ours;
thread_local std::uint64_t tl_latest_serial = 0;
thread_local bool tl_latest_known = false;
void check_serial(const std::vector<std::uintptr_t>& ours, std::uint64_t serial) {
    if (tl_latest_known && serial == tl_latest_serial) {
        INFO("the walk kept the previous walk's serial");
        CHECK(ours == tl_latest_ours);
    }
    tl_latest_ours = ours;
    tl_latest_serial = serial;
    tl_latest_known = true;
}

/// Both unwinds from the same frame: ours (skip 0: the first entry is in this function's
/// caller... of capture_backtrace, i.e. here) and libunwind's, whose first entry is also here.
__attribute__((noinline)) Both capture_both() {
    Both b;
    std::uintptr_t ips[kMaxFrames];
    WalkInfo info;
    const int n = capture_backtrace(ips, kMaxFrames, 0, &info);
    b.from_shadow = info.from_shadow;
    b.serial = info.serial;
    check_serial(std::vector<std::uintptr_t>(ips, ips + n), info.serial);
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
    // Learning is timed (the reports' first-meeting cost); a walk from the table adds nothing
    // (one call site, so that this frame's return address is the same each time).
    clear_frame_rules_for_tests();
    std::uint64_t ticks[3];
    const std::uint64_t before = frame_rule_stats().learn_ticks;
    for (std::uint64_t& t : ticks) {
        check_same(descend(12));
        t = frame_rule_stats().learn_ticks;
    }
    CHECK(ticks[0] > before);
    CHECK(ticks[1] == ticks[0]);
    CHECK(ticks[2] == ticks[0]);
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

// ---- the shadow of the previous walk ---------------------------------------------------------
// Each case below makes two stacks that are the same, frame for frame and state for state (pc,
// sp, bp), from the innermost frame up to some frame, and differ outside it; a walk that trusted
// the previous one without reading the words it read would give the previous stack. Each checks
// against libunwind and that the shadow was used at all (from_shadow > 0) where it may be.

namespace {

/// The frame of mid (its CFA less a constant): equal in two calls when their stacks are the same
/// up to mid.
std::uintptr_t g_mid_frame = 0;

__attribute__((noinline, noipa)) Both mid() {
    g_mid_frame = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    Both b = capture_both();
    asm volatile("" ::: "memory");
    return b;
}

/// (a) One function, two call lines (the asm after each keeps the compiler from merging them).
__attribute__((noinline, noipa)) Both two_lines(int which) {
    Both b;
    if (which == 0) {
        b = mid();
        asm volatile("nop" ::: "memory");
    } else {
        b = mid();
        asm volatile("nop\n\tnop" ::: "memory");
    }
    return b;
}

/// (b) Two callers at the same depth, unlike each other; with the right pad mid's frame is in the
/// same place under both.
__attribute__((noinline, noipa)) Both caller_padded(std::size_t pad) {
    volatile char* p = static_cast<volatile char*>(alloca(pad + 16));
    p[0] = 1;
    Both b = mid();
    asm volatile("" ::"r"(p) : "memory");
    return b;
}
__attribute__((noinline, noipa)) Both caller_big() {
    volatile char buf[512];
    buf[0] = 1;
    Both b = mid();
    asm volatile("" ::"r"(buf) : "memory");
    return b;
}

/// (c) The same code twice (distinct functions, same frame size): mid, mid2 and mid3 get the same
/// CFAs and states through either; only the return address in mid3's frame tells them apart.
__attribute__((noinline, noipa)) Both mid2() {
    Both b = mid();
    asm volatile("" ::: "memory");
    return b;
}
__attribute__((noinline, noipa)) Both mid3() {
    Both b = mid2();
    asm volatile("" ::: "memory");
    return b;
}
template <int Tag> __attribute__((noinline, noipa)) Both path() {
    Both b = mid3();
    asm volatile("" ::"i"(Tag) : "memory");
    return b;
}

/// (f) Paths of their own, six frames each (tagged<1> .. tagged<6>, above mid3), at one depth,
/// each called from two lines of one function: mid3's frame and those inside it are in the same
/// places in the same states under all twelve.
template <int Tag> __attribute__((noinline, noipa)) Both tagged(int n) {
    Both b = n > 0 ? tagged<Tag>(n - 1) : mid3();
    asm volatile("" ::"i"(Tag) : "memory");
    return b;
}
template <int Tag> Both tagged_from(int line) {
    Both b;
    if (line == 0) {
        b = tagged<Tag>(5);
        asm volatile("nop" ::: "memory");
    } else {
        asm volatile("nop\n\tnop" ::: "memory");
        b = tagged<Tag>(5);
        asm volatile("nop\n\tnop" ::: "memory");
    }
    return b;
}
__attribute__((noinline, noipa)) Both six_paths(int line, int tag) {
    switch (tag) {
    case 1: return tagged_from<1>(line);
    case 2: return tagged_from<2>(line);
    case 3: return tagged_from<3>(line);
    case 4: return tagged_from<4>(line);
    case 5: return tagged_from<5>(line);
    default: return tagged_from<6>(line);
    }
}

/// (e) Recursion n deep below an alloca of `pad` bytes: with the right pad two depths put the
/// innermost frames at the same addresses in the same states.
std::uintptr_t g_leaf_frame = 0;
__attribute__((noinline, noipa)) Both recurse(int n) {
    if (n == 0) {
        g_leaf_frame = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
        return capture_both();
    }
    Both b = recurse(n - 1);
    asm volatile("" ::: "memory");
    return b;
}
__attribute__((noinline, noipa)) Both padded(int n, std::size_t pad) {
    volatile char* p = static_cast<volatile char*>(alloca(pad + 16));
    p[0] = 1;
    Both b = recurse(n);
    asm volatile("" ::"r"(p) : "memory");
    return b;
}

} // namespace

TEST_CASE("backtrace shadow: a repeated stack is taken from the previous walk", "[backtrace][shadow]") {
    std::vector<Both> walks;
    for (int i = 0; i < 3; ++i)
        walks.push_back(path<1>()); // the first learns rules: its walk is not usable
    for (const Both& w : walks)
        check_same(w);
    CHECK(walks[2].ours == walks[1].ours);
    CHECK(walks[2].from_shadow == static_cast<int>(walks[2].ours.size())); // not one frame walked
}

TEST_CASE("backtrace shadow: the serial stays only for the same walk with the same limits", "[backtrace][shadow]") {
    std::vector<Both> walks;
    for (int i = 0; i < 3; ++i)
        walks.push_back(path<1>());
    CHECK(walks[2].serial == walks[1].serial); // the same stack again: the caller may keep its work
    const Both other = path<2>();              // another caller three frames out
    CHECK(other.serial != walks[2].serial);
    const Both again = path<1>();
    CHECK(again.serial != other.serial);
    // The same stack with another skip or frame limit gives other frames: another serial.
    std::uintptr_t ips[kMaxFrames];
    WalkInfo a, b, c;
    std::uint64_t serials[3];
    for (int i = 0; i < 2; ++i) {
        (void)capture_backtrace(ips, kMaxFrames, 0, &a);
        serials[0] = a.serial;
        (void)capture_backtrace(ips, kMaxFrames, 1, &b);
        serials[1] = b.serial;
        (void)capture_backtrace(ips, 3, 1, &c);
        serials[2] = c.serial;
    }
    CHECK(serials[0] != serials[1]);
    CHECK(serials[1] != serials[2]);
    WalkInfo d, e;
    (void)capture_backtrace(ips, 3, 1, &d); // the limits of the latest walk, from another line
    (void)capture_backtrace(ips, 3, 1, &e); // and from another line again
    CHECK(d.serial != c.serial);
    CHECK(e.serial != d.serial);
}

TEST_CASE("backtrace shadow: one function called from another line of an outer frame", "[backtrace][shadow]") {
    for (int i = 0; i < 4; ++i) {
        INFO("round " << i);
        const Both a = two_lines(0);
        const std::uintptr_t frame_a = g_mid_frame;
        const Both b = two_lines(1);
        REQUIRE(g_mid_frame == frame_a); // mid's frame in the same place: the walks meet there
        check_same(a);
        check_same(b);
        REQUIRE(a.ours.size() == b.ours.size());
        CHECK(a.ours[2] != b.ours[2]); // the two lines of two_lines
        if (i > 0) {
            CHECK(a.from_shadow > 0); // the frames outside two_lines came from the previous walk
            CHECK(b.from_shadow > 0);
        }
    }
}

TEST_CASE("backtrace shadow: another caller at the same depth", "[backtrace][shadow]") {
    (void)caller_big();
    const std::uintptr_t big_frame = g_mid_frame;
    std::size_t pad = 0;
    for (int tries = 0; tries < 4; ++tries) {
        (void)caller_padded(pad);
        if (g_mid_frame <= big_frame)
            break;
        pad += g_mid_frame - big_frame;
    }
    if (g_mid_frame != big_frame) {
        WARN("no pad puts mid's frame in the same place under both callers (a sanitizer's frames?)");
        return;
    }
    for (int i = 0; i < 4; ++i) {
        INFO("round " << i);
        const Both a = caller_padded(pad);
        const Both b = caller_big();
        check_same(a);
        check_same(b);
        CHECK(a.ours[2] != b.ours[2]);
        if (i > 0) {
            CHECK(a.from_shadow > 0);
            CHECK(b.from_shadow > 0);
        }
    }
}

TEST_CASE("backtrace shadow: a return address rewritten at the same CFA, three frames out", "[backtrace][shadow]") {
    // path<1> and path<2> alternate: every frame from capture_backtrace's to mid3's is at the same
    // address in the same state; the one word that differs is mid3's return address.
    for (int i = 0; i < 8; ++i) {
        INFO("round " << i);
        const Both a = path<1>();
        const std::uintptr_t frame_a = g_mid_frame;
        const Both b = path<2>();
        REQUIRE(g_mid_frame == frame_a);
        check_same(a);
        check_same(b);
        REQUIRE(a.ours.size() == b.ours.size());
        CHECK(a.ours[3] == b.ours[3]); // mid2's call of mid... (inside mid3)
        CHECK(a.ours[4] != b.ours[4]); // ... and mid3's caller: path<1> or path<2>
        if (i > 0) {
            CHECK(a.from_shadow > 0);
            CHECK(b.from_shadow > 0);
        }
    }
}

TEST_CASE("backtrace shadow: two call paths by turns, each from its own remembered walk", "[backtrace][shadow]") {
    // A thread that walks often remembers walks by first frame (sets by stack pointer): two
    // paths at other depths, by turns, each meet their own previous walk at their first frame.
    // The single previous walk would meet them only where they join (caller_padded's caller).
    for (int i = 0; i < 300; ++i)
        (void)capture_both(); // past the walks after which a thread gets its slots
    bool both_whole = false;
    for (std::size_t pad = 32; pad <= 32 * 9 && !both_whole; pad += 32) {
        Both a, b;
        for (int round = 0; round < 3; ++round) {
            a = caller_padded(16);
            b = caller_padded(16 + pad);
            check_same(a);
            check_same(b);
        }
        CHECK(a.ours != b.ours); // two call lines here, and the frames below them at other depths
        // (Each set has two slots, so two paths never push each other out; the loop over pads
        // only keeps the check from depending on where the stack lies.)
        both_whole =
            a.from_shadow == static_cast<int>(a.ours.size()) && b.from_shadow == static_cast<int>(b.ours.size());
    }
    CHECK(both_whole);
}

TEST_CASE("backtrace shadow: six paths at one depth by turns, from two lines each", "[backtrace][shadow]") {
    // A framework's operators, one after another: their walks share the inner frames (mid3 and
    // inside it) and part at their own frames. Each path's walk from the other line of
    // tagged_from is in the same states up to tagged_from's frame, and must not be taken for
    // this one (its return address into tagged_from differs); the same path again at once is
    // the previous walk entire.
    for (int i = 0; i < 300; ++i)
        (void)capture_both(); // past the walks after which a thread gets its slots
    for (int round = 0; round < 4; ++round) {
        for (int line = 0; line < 2; ++line) {
            for (int tag = 1; tag <= 6; ++tag) {
                for (int again = 0; again < 2; ++again) {
                    INFO("round " << round << " line " << line << " tag " << tag << " again " << again);
                    const Both b = six_paths(line, tag);
                    check_same(b);
                    REQUIRE(b.ours.size() > 14);
                    if (round > 0) // (round 0 learns the tagged functions' rules)
                        CHECK(b.from_shadow >= (again == 1 ? static_cast<int>(b.ours.size()) : 1));
                }
            }
        }
    }
    // ours[0] capture_both, 1 mid, 2 mid2, 3 mid3, 4-9 tagged<T>(0..5), 10 tagged_from (the line).
    const Both l0 = six_paths(0, 1), l1 = six_paths(1, 1), t2 = six_paths(1, 2);
    check_same(l0);
    check_same(l1);
    CHECK(l0.ours[4] == l1.ours[4]);   // tagged<1>(0)'s call of mid3...
    CHECK(l0.ours[10] != l1.ours[10]); // ... and tagged_from's of tagged<1>, on one line or the other
    CHECK(t2.ours[4] != l1.ours[4]);   // tagged<2>(0)'s call of mid3
}

TEST_CASE("backtrace shadow: recursion depth changes under frames in the same places", "[backtrace][shadow]") {
    // Find the pad that puts recurse(0) of a 10-deep recursion where a 12-deep one has it.
    (void)padded(12, 0);
    const std::uintptr_t deep_leaf = g_leaf_frame;
    std::size_t pad = 0;
    for (int tries = 0; tries < 4; ++tries) {
        (void)padded(10, pad);
        if (g_leaf_frame <= deep_leaf)
            break;
        pad += g_leaf_frame - deep_leaf;
    }
    if (g_leaf_frame != deep_leaf) {
        WARN("no pad puts the two recursions' innermost frames in the same place (a sanitizer's frames?)");
        return;
    }
    for (int i = 0; i < 4; ++i) {
        INFO("round " << i);
        const Both deep = padded(12, 0);
        const Both shallow = padded(10, pad);
        check_same(deep);
        check_same(shallow);
        CHECK(deep.ours.size() == shallow.ours.size() + 2);
        CHECK(shallow.from_shadow > 0); // padded's frame and those outside it
        CHECK(deep.from_shadow > 0);
        // And the other way round, 10 then 12 from the same shadow.
        const Both shallow2 = padded(10, pad);
        const Both deep2 = padded(12, 0);
        check_same(shallow2);
        check_same(deep2);
        // The same frames up to padded's (the test's own frame calls from other lines).
        REQUIRE(deep.ours.size() >= 15);
        REQUIRE(deep2.ours.size() == deep.ours.size());
        CHECK(std::equal(deep.ours.begin(), deep.ours.begin() + 15, deep2.ours.begin()));
        REQUIRE(shallow2.ours.size() == shallow.ours.size());
        CHECK(std::equal(shallow.ours.begin(), shallow.ours.begin() + 13, shallow2.ours.begin()));
    }
}

namespace {

/// One thread's work for the next case: both threads run it, so that their frames are the same
/// up to the call of `fn`.
struct ThreadRun {
    Both (*fn)() = nullptr;
    const std::vector<unsigned char>* shadow_in = nullptr; ///< the shadow the thread starts with
    std::vector<unsigned char> shadow_out;
    Both out;
    std::uintptr_t frame = 0;
};

__attribute__((noinline, noipa)) void run_thread(ThreadRun* r) {
    bool loaded = true;
    if (r->shadow_in != nullptr)
        loaded = load_walk_shadow_for_tests(*r->shadow_in);
    for (int i = 0; i < 3; ++i) {
        r->out = r->fn(); // the last one, after the first two learnt the rules, is kept
        if (r->shadow_in != nullptr)
            break;
    }
    r->frame = loaded ? g_mid_frame : 0;
    r->shadow_out = save_walk_shadow_for_tests();
}

} // namespace

TEST_CASE("backtrace shadow: a new thread on a dead thread's stack, with the dead thread's shadow",
          "[backtrace][shadow]") {
    // A thread's shadow dies with it; here the new thread is given the old one's on purpose (what a
    // fork child has of its parent): the words it compares, not the thread, make it right.
    ThreadRun a, b, c;
    a.fn = &path<1>;
    std::thread(run_thread, &a).join();
    b.fn = &path<2>;
    b.shadow_in = &a.shadow_out;
    std::thread(run_thread, &b).join();
    REQUIRE(b.frame != 0); // the shadow was loaded
    check_same(a.out);
    check_same(b.out);
    CHECK(a.out.ours[4] != b.out.ours[4]);
    if (a.frame == b.frame)
        CHECK(b.out.from_shadow > 0); // the thread's outer frames (start_thread, clone) from a's walk
    else
        WARN("the second thread did not get the first one's stack: the reuse was not exercised");
    // Without the old shadow, the new thread's first walk has none.
    c.fn = &path<1>;
    c.shadow_in = nullptr;
    std::thread([&] { c.out = path<1>(); }).join();
    check_same(c.out);
    CHECK(c.out.from_shadow == 0);
}

namespace {

/// fn's walk; with `fork_first`, in a child forked here (the parent gets an empty one).
__attribute__((noinline, noipa)) Both walk_after_fork(Both (*fn)(), bool fork_first, pid_t* pid) {
    if (fork_first) {
        *pid = ::fork();
        if (*pid != 0)
            return Both{};
    }
    Both b = fn();
    asm volatile("" ::: "memory");
    return b;
}

} // namespace

TEST_CASE("backtrace shadow: a fork child walks its own stack from the parent's shadow", "[backtrace][shadow]") {
    pid_t pid = -1;
    Both parent;
    for (int k = 0; k < 3; ++k) {
        // One call line for all three: the child's stack is the parent's but for path<2>.
        const Both w = walk_after_fork(k < 2 ? &path<1> : &path<2>, k == 2, &pid);
        if (k == 1)
            parent = w;
        if (k == 2 && pid == 0) {
            // No Catch2 in the child: 0 when its walk is libunwind's and used the shadow.
            bool same = w.ours.size() == w.reference.size() && w.ours.size() > 4;
            for (std::size_t i = 1; same && i < w.ours.size(); ++i)
                same = w.ours[i] == w.reference[i];
            ::_exit(!same ? 1 : (w.ours[4] == parent.ours[4] ? 2 : (w.from_shadow > 0 ? 0 : 3)));
        }
    }
    check_same(parent);
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0); // 1: not libunwind's frames, 2: the parent's, 3: no shadow used
}

TEST_CASE("backtrace shadow: signal handlers, before and after", "[backtrace][shadow]") {
    struct sigaction sa {
    }, old{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    REQUIRE(::sigaction(SIGUSR2, &sa, &old) == 0);
    for (int i = 0; i < 3; ++i) {
        const Both before = path<1>();
        g_handled = 0;
        raise_here();
        REQUIRE(g_handled == 1);
        const Both after = path<2>();
        check_same(before);
        CHECK(check_same(g_in_handler) == 1);
        check_same(after);
    }
    ::sigaction(SIGUSR2, &old, nullptr);
}

TEST_CASE("backtrace shadow: a frame limit, then a deeper limit from the same shadow", "[backtrace][shadow]") {
    std::uintptr_t few[3], all[kMaxFrames], again[kMaxFrames];
    const int n = capture_backtrace(all, kMaxFrames, 0);
    REQUIRE(n > 4);
    REQUIRE(capture_backtrace(few, 3, 0) == 3); // a walk stopped at its limit
    WalkInfo info;
    const int m = capture_backtrace(again, kMaxFrames, 0, &info); // goes on past where that one stopped
    REQUIRE(m == n);
    for (int i = 1; i < n; ++i)
        CHECK(again[i] == all[i]);
    CHECK(few[2] == all[2]);
}

TEST_CASE("backtrace shadow: rules forgotten make the previous walk unusable", "[backtrace][shadow]") {
    (void)path<1>();
    (void)path<1>();
    clear_frame_rules_for_tests();
    const Both b = path<1>();
    check_same(b);
    CHECK(b.from_shadow == 0);
    const Both c = path<1>(); // learnt again while b walked: that walk's frames are not usable
    check_same(c);
    CHECK(c.from_shadow == 0);
    const Both d = path<1>();
    check_same(d);
    CHECK(d.from_shadow > 0);
}

// A frame whose CFA is rbx + 16 (CFI written by hand): stepping out of it needs rbx, which the
// walk does not track, so libunwind unwinds the whole stack from a complete context.
asm(R"(
    .text
    .p2align 4
    .type gpumemprof_test_rbx_cfa_frame,@function
gpumemprof_test_rbx_cfa_frame:
    .cfi_startproc
    push %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset rbx, 0
    mov %rsp, %rbx
    .cfi_def_cfa_register rbx
    sub $40, %rsp
    and $-16, %rsp
    call *%rdi
    mov %rbx, %rsp
    .cfi_def_cfa_register rsp
    pop %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore rbx
    ret
    .cfi_endproc
    .size gpumemprof_test_rbx_cfa_frame, .-gpumemprof_test_rbx_cfa_frame
)");
extern "C" void gpumemprof_test_rbx_cfa_frame(void (*)());

namespace {
Both g_under_rbx_frame;
__attribute__((noinline, noipa)) void capture_under_rbx_frame() {
    g_under_rbx_frame = capture_both();
}
} // namespace

TEST_CASE("backtrace: a frame only libunwind can step out of", "[backtrace]") {
    for (int i = 0; i < 3; ++i) {
        INFO("walk " << i);
        const std::uint64_t before = frame_rule_stats().full_unwinds;
        gpumemprof_test_rbx_cfa_frame(&capture_under_rbx_frame);
        CHECK(frame_rule_stats().full_unwinds == before + 1);
        check_same(g_under_rbx_frame); // the same frames as libunwind's own, from the same first frame
    }
}

namespace {

struct FrameOfLocal {
    int frames = 0;              ///< latest_walk_sps's count
    bool increasing = true;      ///< sps grow outward
    std::uintptr_t owner = 0;    ///< ips[i] of the frame whose [sps[i], sps[i + 1]) holds the local
    std::uintptr_t expected = 0; ///< the return address into the local's function, minus one
    int stale = -1;              ///< latest_walk_sps for that walk after another one
};

/// Walks, then finds which frame's stack span holds `local` (an address in the caller's frame).
__attribute__((noinline)) FrameOfLocal walk_and_find(const volatile char* local, int skip) {
    FrameOfLocal r;
    std::uintptr_t ips[kMaxFrames], sps[kMaxFrames];
    WalkInfo info;
    const int n = capture_backtrace(ips, kMaxFrames, skip, &info);
    r.frames = latest_walk_sps(sps, n, skip, info.serial);
    // Another walk since (as a signal handler's could be): none for this walk's serial.
    std::uintptr_t other[kMaxFrames];
    capture_backtrace(other, 4, 0);
    r.stale = latest_walk_sps(other, kMaxFrames, skip, info.serial);
    r.expected = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0)) - 1;
    const auto at = reinterpret_cast<std::uintptr_t>(local);
    for (int i = 0; i + 1 < r.frames; ++i) {
        r.increasing = r.increasing && sps[i] < sps[i + 1];
        if (sps[i] <= at && at < sps[i + 1])
            r.owner = ips[i];
    }
    return r;
}

/// A frame with a local of its own, like the eval loop's entry shim.
__attribute__((noinline)) FrameOfLocal frame_with_local(int skip) {
    volatile char local[48];
    local[0] = 1;
    FrameOfLocal r = walk_and_find(local, skip);
    asm volatile("" ::: "memory");
    return r;
}

__attribute__((noinline)) FrameOfLocal one_frame_out(int skip) {
    FrameOfLocal r = frame_with_local(skip);
    asm volatile("" ::: "memory");
    return r;
}

} // namespace

TEST_CASE("backtrace: the latest walk's stack pointers say which frame holds a local", "[backtrace]") {
    // Twice: the second walk is taken from the shadow of the first, and says the same.
    for (int round = 0; round < 2; ++round) {
        for (int skip : {0, 1}) {
            const FrameOfLocal r = one_frame_out(skip);
            INFO("round " << round << ", skip " << skip);
            CHECK(r.frames > 3);
            CHECK(r.increasing);
            // skip 1 drops walk_and_find's own frame: the local's frame is still found, by address.
            CHECK(r.owner == r.expected);
            CHECK(r.stale == 0);
        }
    }
}
