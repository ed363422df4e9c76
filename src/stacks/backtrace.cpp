// SPDX-License-Identifier: MIT
// Stack capture: a walk over the calling thread's stack with the shared frame rules. A frame
// costs one lookup in the rules table and one or two reads of the stack; nothing per thread but
// the stack's bounds (and, on the rare fallback, one register context).
#include "stacks/backtrace.hpp"

#include "stacks/frame_rules.hpp"
#include "util/per_thread.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <pthread.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

extern "C" void* __libc_stack_end; // glibc: near the top of the main thread's stack

namespace gpumemprof::stacks {

namespace {

thread_local StackBounds tl_bounds;
thread_local bool tl_bounds_probed = false;

void probe_bounds(StackBounds* b) noexcept {
    pthread_attr_t attr;
    if (::pthread_getattr_np(::pthread_self(), &attr) == 0) {
        void* addr = nullptr;
        std::size_t size = 0;
        if (::pthread_attr_getstack(&attr, &addr, &size) == 0 && addr != nullptr && size > 0) {
            b->lo = reinterpret_cast<std::uintptr_t>(addr);
            b->hi = b->lo + size;
            b->known = true;
        }
        ::pthread_attr_destroy(&attr);
    }
    if (!b->known && ::syscall(SYS_gettid) == ::getpid() && __libc_stack_end != nullptr) {
        // The main thread without /proc (pthread_getattr_np reads /proc/self/maps): its frames
        // all lie below the start-up words at __libc_stack_end, whose page is mapped.
        const long page = ::sysconf(_SC_PAGESIZE);
        const auto end = reinterpret_cast<std::uintptr_t>(__libc_stack_end);
        b->hi = (end + static_cast<std::uintptr_t>(page)) & ~static_cast<std::uintptr_t>(page - 1);
        b->lo = 0;
        b->known = true;
    }
}

/// The register context for the fallback (a full unwind by libunwind), on the heap so that a
/// capture costs the thread's stack only its own small frame.
struct Fallback {
    ucontext_t uc;
};
Fallback* fallback() noexcept {
    return util::PerThread<Fallback>::get();
}

inline std::uintptr_t load(std::uintptr_t addr) noexcept {
    std::uintptr_t v;
    std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
    return v;
}

} // namespace

const StackBounds& thread_stack_bounds() noexcept {
    if (!tl_bounds_probed) {
        tl_bounds_probed = true;
        probe_bounds(&tl_bounds);
    }
    return tl_bounds;
}

__attribute__((noinline)) int capture_backtrace(std::uintptr_t* ips, int max_frames, int skip) noexcept {
    if (ips == nullptr || max_frames <= 0)
        return 0;
    skip = std::clamp(skip, 0, 16);
    max_frames = std::min(max_frames, kMaxFrames);
    std::uintptr_t pc, sp, bp;
    // This function's own frame: the rule at this very instruction applies to sp and bp here.
    asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
    const StackBounds& b = thread_stack_bounds();
    if (!b.known || sp < b.lo || sp >= b.hi)
        return 0; // not on the thread's own stack (a coroutine, a signal stack) or bounds unknown
    const StackWindow w{sp, b.hi};
    const rules_table::Table* table = rules_table::g_table.load(std::memory_order_acquire);
    int out = 0, seen = 0;
    for (int steps = 0; steps < kMaxFrames + 32; ++steps) {
        FrameRule r;
        if (!rules_table::find(table, pc, &r)) {
            r = frame_rule(FrameRegs{pc, sp, bp}, w);
            table = rules_table::g_table.load(std::memory_order_acquire); // may have grown
        }
        std::uintptr_t cfa;
        if (r.kind == FrameRule::cfa_sp) {
            cfa = sp + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(r.cfa_offset));
        } else if (r.kind == FrameRule::cfa_bp) {
            cfa = bp + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(r.cfa_offset));
        } else if (r.kind == FrameRule::sigreturn) {
            // The kernel's frame: the interrupted registers are in the ucontext at sp; the
            // interrupted pc is exact (not a return address).
            const std::uintptr_t gregs = sp + offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, gregs);
            if (!w.holds(gregs, sizeof(gregset_t)))
                break;
            const std::uintptr_t next_pc = load(gregs + REG_RIP * sizeof(greg_t));
            const std::uintptr_t next_sp = load(gregs + REG_RSP * sizeof(greg_t));
            if (next_sp <= sp || !w.holds(next_sp, 0) || next_pc < 0x4000)
                break;
            bp = load(gregs + REG_RBP * sizeof(greg_t));
            sp = next_sp;
            pc = next_pc;
            if (seen++ >= skip && (ips[out++] = pc, out >= max_frames))
                break;
            continue;
        } else if (r.kind == FrameRule::other) {
            FrameRegs f{pc, sp, bp};
            const int stepped = step_with_libunwind(&f, w);
            if (stepped == 0 || (stepped > 0 && f.sp <= sp))
                break;
            if (stepped < 0) {
                // A frame that needs more registers than pc, sp and bp: libunwind unwinds the
                // whole stack again from a complete context.
                Fallback* fb = fallback();
                if (fb == nullptr || ::getcontext(&fb->uc) != 0)
                    break;
                const int n = unwind_with_libunwind(&fb->uc, ips, max_frames, skip, w);
                return n > out ? n : out;
            }
            pc = f.pc;
            sp = f.sp;
            bp = f.bp;
            if (seen++ >= skip && (ips[out++] = pc, out >= max_frames))
                break;
            continue;
        } else {
            break; // last, stop
        }
        // Every read lies in [sp, top of the stack): cfa > sp is checked first.
        if (cfa <= sp || cfa > w.hi)
            break;
        const std::uintptr_t ra = load(cfa - 8);
        if (r.bp_offset != FrameRule::kBpKept) {
            const std::uintptr_t at = cfa + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(r.bp_offset));
            if (!w.holds(at, 8) || at < sp)
                break;
            bp = load(at);
        }
        sp = cfa;
        if (ra < 0x4000)
            break; // the end, or nothing sensible
        pc = ra - 1;
        if (seen++ >= skip && (ips[out++] = pc, out >= max_frames))
            break;
    }
    return out;
}

} // namespace gpumemprof::stacks
