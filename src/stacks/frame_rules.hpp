// SPDX-License-Identifier: MIT
// How to step from a frame to its caller, learnt once per code address for the whole process.
// The hot path (backtrace.cpp) walks the stack with these rules from a shared table that it reads
// without a lock; an address met for the first time is worked out by libunwind, through an
// address space of our own whose every memory read is checked first (frame_rules.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ucontext.h>

namespace gpumemprof::stacks {

/// x86-64 frames as compilers lay them out: the caller's stack pointer (the CFA) is the frame's
/// stack or frame pointer plus a constant, the return address sits just below the CFA, and the
/// caller's frame pointer is either untouched or saved at a constant offset from the CFA.
struct FrameRule {
    enum Kind : std::uint8_t {
        unknown = 0, ///< not in the table
        cfa_sp,      ///< CFA = sp + cfa_offset
        cfa_bp,      ///< CFA = bp + cfa_offset
        sigreturn,   ///< the kernel's signal return trampoline: the interrupted context is at sp
        last,        ///< the outermost frame (its caller is undefined)
        stop,        ///< no way on (no unwind information libunwind can use)
        other,       ///< something else (a CFA expression): step it with libunwind every time
    };
    static constexpr std::int16_t kBpKept = INT16_MIN; ///< the caller's bp is this frame's bp
    Kind kind = unknown;
    std::int16_t bp_offset = kBpKept; ///< the caller's bp is saved at CFA + bp_offset
    std::int32_t cfa_offset = 0;
};

/// Where a frame is: `pc` is the address its rule is looked up at (a return address minus one,
/// or the exact address for the innermost frame and a frame interrupted by a signal).
struct FrameRegs {
    std::uintptr_t pc = 0, sp = 0, bp = 0;
};

/// The calling thread's stack that an unwind may read: [lo, hi), with lo at or below the
/// unwinder's own stack pointer.
struct StackWindow {
    std::uintptr_t lo = 0, hi = 0;
    bool holds(std::uintptr_t addr, std::uintptr_t bytes) const noexcept {
        return addr >= lo && addr <= hi && hi - addr >= bytes;
    }
};

/// The rule for `at.pc`. A repeated address costs one lookup in the shared table; an address seen
/// for the first time is worked out by libunwind (a few microseconds, under a lock) from `at`
/// and the window, then kept for every thread. Never throws; `stop` when it cannot be known.
FrameRule frame_rule(const FrameRegs& at, const StackWindow& w) noexcept;

/// The table itself, for the hot path's inline lookup (frame_rules.cpp writes it).
namespace rules_table {
struct Slot {
    std::atomic<std::uint64_t> key{0}; ///< 0 empty, 1 forgotten, else a pc
    std::atomic<std::uint64_t> rule{0};
};
struct Table {
    std::size_t mask = 0;
    std::size_t used = 0; ///< slots holding a key or a forgotten mark (writers only)
    Slot* slots = nullptr;
};
inline constexpr int kMaxProbe = 64;
extern std::atomic<Table*> g_table;
/// Goes up (release) each time rules are forgotten: a walk remembered under another value may
/// have stepped with rules that are gone (backtrace.cpp's shadow of the previous walk).
extern std::atomic<std::uint64_t> g_generation;
inline std::size_t slot_of(std::uint64_t pc, std::size_t mask) noexcept {
    return static_cast<std::size_t>((pc * 0x9e3779b97f4a7c15ull) >> 40) & mask;
}
inline FrameRule decode(std::uint64_t w) noexcept {
    FrameRule r;
    r.kind = static_cast<FrameRule::Kind>(w & 0xff);
    r.bp_offset = static_cast<std::int16_t>(static_cast<std::uint16_t>((w >> 8) & 0xffff));
    r.cfa_offset = static_cast<std::int32_t>(static_cast<std::uint32_t>(w >> 32));
    return r;
}
/// Lock-free: a slot's rule is written before its key (release), read after it (acquire).
__attribute__((always_inline)) inline bool find(const Table* t, std::uint64_t pc, FrameRule* out) noexcept {
    if (t == nullptr)
        return false;
    std::size_t i = slot_of(pc, t->mask);
    for (int n = 0; n < kMaxProbe; ++n) {
        const std::uint64_t k = t->slots[i].key.load(std::memory_order_acquire);
        if (k == pc) {
            *out = decode(t->slots[i].rule.load(std::memory_order_relaxed));
            return true;
        }
        if (k == 0)
            return false;
        i = (i + 1) & t->mask;
    }
    return false;
}
} // namespace rules_table

/// frame_rule with the common case inline: a hit costs a hash, a load or two and a compare.
inline FrameRule frame_rule_fast(const FrameRegs& at, const StackWindow& w) noexcept {
    FrameRule r;
    if (rules_table::find(rules_table::g_table.load(std::memory_order_acquire), at.pc, &r))
        return r;
    return frame_rule(at, w);
}

/// Steps one frame with libunwind (a rule of kind `other`): 1 and `regs` became the caller's; 0
/// no caller can be found; -1 libunwind would need registers other than pc, sp and bp.
int step_with_libunwind(FrameRegs* regs, const StackWindow& w) noexcept;

/// A full unwind by libunwind from a complete register context (the fallback when a frame needs
/// more than pc, sp and bp). Writes return addresses minus one (as the fast walk does), skipping
/// the first `skip` frames above the context's own. Returns the number written.
int unwind_with_libunwind(const ucontext_t* uc, std::uintptr_t* out, int max, int skip, const StackWindow& w) noexcept;

/// Code in [lo, hi) was unloaded: its rules are dropped (another module may be loaded there).
void forget_frame_rules(std::uintptr_t lo, std::uintptr_t hi) noexcept;

struct FrameRuleStats {
    std::uint64_t rules = 0;           ///< addresses in the table
    std::uint64_t learnt = 0;          ///< addresses worked out by libunwind (table misses)
    std::uint64_t learn_ticks = 0;     ///< time-stamp counter ticks spent on those (util::CycleClock)
    std::uint64_t libunwind_steps = 0; ///< frames stepped by libunwind one at a time
    std::uint64_t full_unwinds = 0;    ///< stacks unwound entirely by libunwind
    std::uint64_t table_bytes = 0;     ///< memory the table holds (one table for the process)
};
FrameRuleStats frame_rule_stats() noexcept;

/// fork: the table's lock (held around every call into libunwind) is taken before fork and
/// released after it in both processes.
void lock_frame_rules_for_fork() noexcept;
void unlock_frame_rules_after_fork() noexcept;

/// For tests: forget every rule (the next walk learns them again).
void clear_frame_rules_for_tests() noexcept;

} // namespace gpumemprof::stacks
