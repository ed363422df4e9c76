// SPDX-License-Identifier: MIT
// Frame rules (see frame_rules.hpp): a process-wide table, read without a lock, of how to step
// each code address; libunwind works out the addresses the table does not hold yet.
//
// libunwind runs in an address space of our own ("remote" in its terms, over our own memory), so
// that every word it reads passes our check first: the calling thread's stack above the reader's
// own frame, or a readable segment of a loaded module. A garbage frame pointer, a JIT frame
// without unwind information or a wrong guess then ends the stack instead of faulting.
//
// How a rule is learnt for an address: libunwind steps the frame three times, from the real
// registers and with sp, then bp, moved by 16 bytes. A CFA of sp + c moves with sp only, one of
// bp + c with bp only; anything else (a CFA computed from memory, from another register) is
// "other" and is stepped by libunwind every time. The return address must be the word below the
// CFA, and the caller's bp either unchanged or at a constant offset from the CFA, checked the
// same way.
#include "stacks/frame_rules.hpp"

#include "stacks/unwinder_fds.hpp"
#include "util/cycle_clock.hpp"
#include "util/swallowed.hpp"

#include <libunwind.h> // the generic (remote-capable) API: no UNW_LOCAL_ONLY in this file

#include <algorithm>
#include <atomic>
#include <cstring>
#include <link.h>
#include <mutex>
#include <new>
#include <vector>

namespace gpumemprof::stacks {

std::atomic<rules_table::Table*> rules_table::g_table{nullptr};
std::atomic<std::uint64_t> rules_table::g_generation{0};

namespace {

// ---- the shared table -----------------------------------------------------------------------
// Open addressing, linear probing. A slot is written (rule, then key with release) only under
// g_mutex; readers load the key with acquire and then the rule. Keys 0 (empty) and 1 (forgotten)
// are never code addresses. Growth publishes a new table; old ones stay allocated (readers may
// still be in them) and are at most as large as the live one together.

constexpr std::uint64_t kEmpty = 0, kForgotten = 1;
constexpr std::size_t kInitialSlots = std::size_t{1} << 12; // 64 KiB
constexpr std::size_t kMaxSlots = std::size_t{1} << 21;     // 32 MiB, about a million addresses

using rules_table::find;
using rules_table::g_table;
using rules_table::kMaxProbe;
using rules_table::Slot;
using rules_table::slot_of;
using rules_table::Table;

std::mutex g_mutex; // writers of the table, and every call into libunwind
std::atomic<std::uint64_t> g_rules{0}, g_learnt{0}, g_steps{0}, g_full{0}, g_table_bytes{0};
/// Time-stamp counter ticks spent learning rules (frame_rule's slow path, its lock included).
std::atomic<std::uint64_t> g_learn_ticks{0};

inline std::uint64_t encode(const FrameRule& r) noexcept {
    return static_cast<std::uint64_t>(r.kind) |
           (static_cast<std::uint64_t>(static_cast<std::uint16_t>(r.bp_offset)) << 8) |
           (static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.cfa_offset)) << 32);
}

Table* make_table(std::size_t slots) noexcept {
    auto* t = new (std::nothrow) Table;
    if (t == nullptr)
        return nullptr;
    t->slots = new (std::nothrow) Slot[slots];
    if (t->slots == nullptr) {
        delete t;
        return nullptr;
    }
    t->mask = slots - 1;
    g_table_bytes.fetch_add(slots * sizeof(Slot), std::memory_order_relaxed);
    return t;
}

/// Under g_mutex. False when the key could not be placed (table full at its largest size).
bool place(Table* t, std::uint64_t pc, std::uint64_t rule) noexcept {
    std::size_t i = slot_of(pc, t->mask);
    for (int n = 0; n < kMaxProbe; ++n) {
        const std::uint64_t k = t->slots[i].key.load(std::memory_order_relaxed);
        if (k == pc)
            return true; // learnt meanwhile by another thread (same rule)
        if (k == kEmpty) {
            t->slots[i].rule.store(rule, std::memory_order_relaxed);
            t->slots[i].key.store(pc, std::memory_order_release);
            ++t->used;
            return true;
        }
        i = (i + 1) & t->mask;
    }
    return false;
}

/// Under g_mutex: a table with room for one more key (grown, or rebuilt without forgotten slots).
Table* table_with_room() noexcept {
    Table* t = g_table.load(std::memory_order_relaxed);
    if (t == nullptr) {
        t = make_table(kInitialSlots);
        g_table.store(t, std::memory_order_release);
        return t;
    }
    if ((t->used + 1) * 2 <= t->mask + 1)
        return t;
    const std::size_t live = g_rules.load(std::memory_order_relaxed);
    std::size_t size = t->mask + 1;
    if ((live + 1) * 4 > size)
        size *= 2;
    if (size > kMaxSlots)
        return nullptr; // full at its largest size: later addresses are learnt each time
    Table* n = make_table(size);
    if (n == nullptr)
        return nullptr;
    for (std::size_t i = 0; i <= t->mask; ++i) {
        const std::uint64_t k = t->slots[i].key.load(std::memory_order_relaxed);
        if (k != kEmpty && k != kForgotten)
            (void)place(n, k, t->slots[i].rule.load(std::memory_order_relaxed));
    }
    g_table.store(n, std::memory_order_release); // the old table stays: readers may be in it
    return n;
}

void remember(std::uint64_t pc, const FrameRule& r) noexcept {
    Table* t = table_with_room();
    if (t != nullptr && place(t, pc, encode(r)))
        g_rules.fetch_add(1, std::memory_order_relaxed);
}

// ---- memory libunwind may read ----------------------------------------------------------------

struct Segment {
    std::uintptr_t lo, hi;
};

/// Readable PT_LOAD segments of the loaded modules (under g_mutex), refreshed when dl_iterate_phdr
/// reports a module loaded or unloaded since the last look.
struct Modules {
    std::vector<Segment> segments;
    unsigned long long adds = ~0ull, subs = ~0ull;
};
Modules g_modules;

int count_changes(dl_phdr_info* info, size_t size, void* data) {
    auto* c = static_cast<unsigned long long*>(data);
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
    }
    return 1; // the counters are the same in every entry: the first one is enough
}

int collect_segments(dl_phdr_info* info, size_t, void* data) {
    auto* out = static_cast<std::vector<Segment>*>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || (ph.p_flags & PF_R) == 0 || ph.p_memsz == 0)
            continue;
        const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        out->push_back(Segment{lo, lo + ph.p_memsz});
    }
    return 0;
}

void refresh_modules() noexcept {
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(count_changes, c);
    if (c[0] == g_modules.adds && c[1] == g_modules.subs && !g_modules.segments.empty())
        return;
    try {
        std::vector<Segment> s;
        s.reserve(g_modules.segments.size() + 16);
        dl_iterate_phdr(collect_segments, &s);
        std::sort(s.begin(), s.end(), [](const Segment& a, const Segment& b) { return a.lo < b.lo; });
        g_modules.segments.swap(s);
        g_modules.adds = c[0];
        g_modules.subs = c[1];
    } catch (...) {
        g_modules.segments.clear(); // out of memory: module reads are refused, stacks end early
    }
}

bool in_module(std::uintptr_t addr, std::uintptr_t bytes) noexcept {
    const auto& s = g_modules.segments;
    auto it =
        std::upper_bound(s.begin(), s.end(), addr, [](std::uintptr_t a, const Segment& seg) { return a < seg.lo; });
    if (it == s.begin())
        return false;
    --it;
    return addr >= it->lo && addr < it->hi && it->hi - addr >= bytes;
}

// ---- libunwind over our own memory ------------------------------------------------------------

/// What our callbacks answer for one libunwind cursor.
struct Probe {
    FrameRegs regs;
    const ucontext_t* uc = nullptr; ///< a full context (the fallback unwind), else regs only
    std::uintptr_t stack_hi = 0;
    bool needed_other = false; ///< libunwind asked for a register we do not know
};

/// The stack a callback may read: from its own frame (everything above it is live stack of this
/// thread, mapped) up to the top of the thread's stack.
bool stack_readable(const Probe& p, std::uintptr_t addr, std::uintptr_t bytes) noexcept {
    const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    return addr >= here && addr <= p.stack_hi && p.stack_hi - addr >= bytes;
}

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
    auto* p = static_cast<Probe*>(arg);
    if (write != 0 || p == nullptr)
        return -UNW_EINVAL;
    if (!stack_readable(*p, addr, sizeof *val) && !in_module(addr, sizeof *val))
        return -UNW_EINVAL;
    std::memcpy(val, reinterpret_cast<const void*>(addr), sizeof *val);
    return 0;
}

int greg_index(unw_regnum_t reg) noexcept {
    switch (reg) {
    case UNW_X86_64_RAX: return REG_RAX;
    case UNW_X86_64_RDX: return REG_RDX;
    case UNW_X86_64_RCX: return REG_RCX;
    case UNW_X86_64_RBX: return REG_RBX;
    case UNW_X86_64_RSI: return REG_RSI;
    case UNW_X86_64_RDI: return REG_RDI;
    case UNW_X86_64_RBP: return REG_RBP;
    case UNW_X86_64_RSP: return REG_RSP;
    case UNW_X86_64_R8: return REG_R8;
    case UNW_X86_64_R9: return REG_R9;
    case UNW_X86_64_R10: return REG_R10;
    case UNW_X86_64_R11: return REG_R11;
    case UNW_X86_64_R12: return REG_R12;
    case UNW_X86_64_R13: return REG_R13;
    case UNW_X86_64_R14: return REG_R14;
    case UNW_X86_64_R15: return REG_R15;
    case UNW_X86_64_RIP: return REG_RIP;
    default: return -1;
    }
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
    auto* p = static_cast<Probe*>(arg);
    if (write != 0 || p == nullptr)
        return -UNW_EREADONLYREG;
    if (p->uc != nullptr) {
        const int i = greg_index(reg);
        if (i < 0)
            return -UNW_EBADREG;
        *val = static_cast<unw_word_t>(p->uc->uc_mcontext.gregs[i]);
        return 0;
    }
    switch (reg) {
    case UNW_X86_64_RIP: *val = p->regs.pc; return 0;
    case UNW_X86_64_RSP: *val = p->regs.sp; return 0;
    case UNW_X86_64_RBP: *val = p->regs.bp; return 0;
    default: p->needed_other = true; return -UNW_EBADREG;
    }
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
    return -UNW_EBADREG;
}
int resume(unw_addr_space_t, unw_cursor_t*, void*) {
    return -UNW_EINVAL;
}
int no_dynamic_info(unw_addr_space_t, unw_word_t*, void*) {
    return -UNW_ENOINFO; // code registered at run time (_U_dyn_register) is not looked at
}

unw_addr_space_t g_as = nullptr;

/// Under g_mutex. libunwind's own lookup of unwind tables in this process (dl_iterate_phdr over
/// .eh_frame_hdr), reading through our accessors.
bool address_space() noexcept {
    if (g_as != nullptr)
        return true;
    unw_accessors_t* local = unw_get_accessors(unw_local_addr_space);
    if (local == nullptr || local->find_proc_info == nullptr)
        return false;
    unw_accessors_t acc;
    std::memset(&acc, 0, sizeof acc);
    acc.find_proc_info = local->find_proc_info;
    acc.put_unwind_info = local->put_unwind_info;
    acc.get_dyn_info_list_addr = no_dynamic_info;
    acc.access_mem = access_mem;
    acc.access_reg = access_reg;
    acc.access_fpreg = access_fpreg;
    acc.resume = resume;
    acc.get_proc_name = nullptr;
    g_as = unw_create_addr_space(&acc, 0);
    if (g_as == nullptr)
        return false;
    unw_set_caching_policy(g_as, UNW_CACHE_GLOBAL);
    return true;
}

struct Stepped {
    std::uintptr_t ra = 0, cfa = 0, bp = 0;
    unw_save_loc_t bp_loc{};
    bool signal = false; ///< the stepped frame was a signal frame: the caller's pc is exact
};

/// One libunwind step of the frame at `regs` (under g_mutex): 1 stepped, 0 outermost frame,
/// negative: cannot (including a register we do not know was needed).
int step_once(const FrameRegs& regs, std::uintptr_t stack_hi, Stepped* out) noexcept {
    Probe p;
    p.regs = regs;
    p.stack_hi = stack_hi;
    unw_cursor_t c;
    if (unw_init_remote(&c, g_as, &p) < 0)
        return -1;
    const int r = unw_step(&c);
    if (p.needed_other)
        return -2;
    if (r <= 0)
        return r == 0 ? 0 : -1;
    unw_word_t v = 0;
    if (unw_get_reg(&c, UNW_REG_IP, &v) < 0)
        return -1;
    out->ra = v;
    if (unw_get_reg(&c, UNW_REG_SP, &v) < 0)
        return -1;
    out->cfa = v;
    if (unw_get_reg(&c, UNW_X86_64_RBP, &v) < 0 || p.needed_other)
        return -2;
    out->bp = v;
    if (unw_get_save_loc(&c, UNW_X86_64_RBP, &out->bp_loc) < 0)
        out->bp_loc.type = UNW_SLT_NONE;
    out->signal = unw_is_signal_frame(&c) > 0;
    return 1;
}

/// x86-64 Linux rt_sigreturn trampoline: mov $15, %rax; syscall.
constexpr unsigned char kSigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

bool is_sigreturn(std::uintptr_t pc) noexcept {
    if (!in_module(pc, sizeof kSigreturn))
        return false;
    return std::memcmp(reinterpret_cast<const void*>(pc), kSigreturn, sizeof kSigreturn) == 0;
}

std::uintptr_t read_word(std::uintptr_t addr) noexcept {
    std::uintptr_t v;
    std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
    return v;
}

/// Under g_mutex: the rule for `at`, from three libunwind steps (see the top of this file).
FrameRule learn(const FrameRegs& at, const StackWindow& w) noexcept {
    FrameRule rule;
    // pc is a return address minus one: the trampoline starts at pc + 1 (glibc puts a nop before
    // it so that pc still lies in its unwind entry).
    if (is_sigreturn(at.pc + 1) || is_sigreturn(at.pc)) {
        rule.kind = FrameRule::sigreturn;
        return rule;
    }
    Stepped s0, s1, s2;
    const int r0 = step_once(at, w.hi, &s0);
    if (r0 == 0) {
        rule.kind = FrameRule::last;
        return rule;
    }
    if (r0 < 0) {
        rule.kind = r0 == -2 ? FrameRule::other : FrameRule::stop;
        return rule;
    }
    rule.kind = FrameRule::other;
    const std::uintptr_t cfa = s0.cfa;
    if (s0.signal || cfa <= at.sp || !w.holds(cfa - 8, 8) || read_word(cfa - 8) != s0.ra)
        return rule;
    constexpr std::uintptr_t d = 16;
    FrameRegs moved_sp = at, moved_bp = at;
    moved_sp.sp -= d;
    moved_bp.bp -= d;
    const bool ok1 = step_once(moved_sp, w.hi, &s1) == 1;
    const bool ok2 = step_once(moved_bp, w.hi, &s2) == 1;
    std::int64_t offset = 0;
    if (ok1 && ok2 && s1.cfa == cfa - d && s2.cfa == cfa) {
        rule.kind = FrameRule::cfa_sp;
        offset = static_cast<std::int64_t>(cfa - at.sp);
    } else if (ok1 && ok2 && s1.cfa == cfa && s2.cfa == cfa - d) {
        rule.kind = FrameRule::cfa_bp;
        offset = static_cast<std::int64_t>(cfa) - static_cast<std::int64_t>(at.bp);
    } else {
        return rule;
    }
    if (offset < INT32_MIN || offset > INT32_MAX) {
        rule.kind = FrameRule::other;
        return rule;
    }
    rule.cfa_offset = static_cast<std::int32_t>(offset);
    // Where the caller's bp comes from. The step that left bp alone tells the two cases apart: a
    // saved bp is the same word again, a kept one follows the register.
    const Stepped& same_cfa = rule.kind == FrameRule::cfa_sp ? s2 : s1;
    if (s0.bp_loc.type == UNW_SLT_MEMORY) {
        const std::int64_t k = static_cast<std::int64_t>(s0.bp_loc.u.addr) - static_cast<std::int64_t>(cfa);
        if (k <= FrameRule::kBpKept || k > INT16_MAX || !w.holds(s0.bp_loc.u.addr, 8) ||
            read_word(s0.bp_loc.u.addr) != s0.bp || same_cfa.bp != s0.bp) {
            rule.kind = FrameRule::other;
            return rule;
        }
        rule.bp_offset = static_cast<std::int16_t>(k);
    } else {
        const bool follows = rule.kind == FrameRule::cfa_sp ? (s0.bp == at.bp && s2.bp == moved_bp.bp)
                                                            : (s0.bp == at.bp && s1.bp == at.bp);
        if (!follows) {
            rule.kind = FrameRule::other;
            return rule;
        }
        rule.bp_offset = FrameRule::kBpKept;
    }
    return rule;
}

/// Set while this thread holds g_mutex: a signal handler that allocates on the same thread must
/// not wait for it (it would wait for itself); its stack ends at the first unknown address.
thread_local bool tl_holding = false;

struct Holding {
    std::unique_lock<std::mutex> lock;
    Holding() : lock(g_mutex, std::defer_lock) {
        if (!tl_holding) {
            lock.lock();
            tl_holding = true;
        }
    }
    ~Holding() {
        if (lock.owns_lock())
            tl_holding = false;
    }
    bool held() const noexcept { return lock.owns_lock(); }
};

/// Under g_mutex, before calling into libunwind: its validation pipe guarded (unwinder_fds.hpp),
/// its address space made, the module table current. False: no unwinding now.
bool ready_for_libunwind() noexcept {
    (void)guard_unwinder_fds();
    if (!address_space())
        return false;
    refresh_modules();
    return true;
}

} // namespace

FrameRule frame_rule(const FrameRegs& at, const StackWindow& w) noexcept {
    FrameRule r;
    if (find(g_table.load(std::memory_order_acquire), at.pc, &r))
        return r;
    r.kind = FrameRule::stop;
    // What learning costs (the lock's wait included), for the reports: a short run pays it for
    // most of its captures, a long one once.
    struct Timed {
        std::uint64_t t0 = util::CycleClock::now();
        ~Timed() { g_learn_ticks.fetch_add(util::CycleClock::now() - t0, std::memory_order_relaxed); }
    } timed;
    try {
        Holding lock;
        if (!lock.held())
            return r;
        if (find(g_table.load(std::memory_order_relaxed), at.pc, &r))
            return r;
        if (!ready_for_libunwind())
            return r;
        r = learn(at, w);
        g_learnt.fetch_add(1, std::memory_order_relaxed);
        // "stop" without a module table (out of memory) says nothing about the address: not kept.
        if (r.kind != FrameRule::stop || !g_modules.segments.empty())
            remember(at.pc, r);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return r;
}

int step_with_libunwind(FrameRegs* regs, const StackWindow& w) noexcept {
    try {
        Holding lock;
        if (!lock.held())
            return 0;
        if (!ready_for_libunwind())
            return 0;
        Stepped s;
        const int r = step_once(*regs, w.hi, &s);
        if (r == -2)
            return -1;
        if (r != 1 || s.ra < 0x4000 || s.cfa <= regs->sp || !w.holds(s.cfa, 0))
            return 0;
        g_steps.fetch_add(1, std::memory_order_relaxed);
        regs->pc = s.signal ? s.ra : s.ra - 1;
        regs->sp = s.cfa;
        regs->bp = s.bp;
        return 1;
    } catch (...) {
        return 0;
    }
}

int unwind_with_libunwind(const ucontext_t* uc, std::uintptr_t* out, int max, int skip, const StackWindow& w) noexcept {
    if (uc == nullptr || out == nullptr || max <= 0)
        return 0;
    try {
        Holding lock;
        if (!lock.held())
            return 0;
        if (!ready_for_libunwind())
            return 0;
        g_full.fetch_add(1, std::memory_order_relaxed);
        Probe p;
        p.uc = uc;
        p.stack_hi = w.hi;
        unw_cursor_t c;
        if (unw_init_remote(&c, g_as, &p) < 0)
            return 0;
        int n = 0, seen = 0;
        while (n < max && unw_step(&c) > 0) {
            unw_word_t ip = 0;
            if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip < 0x4000)
                break;
            if (seen++ < skip)
                continue;
            out[n++] = ip - 1;
        }
        return n;
    } catch (...) {
        return 0;
    }
}

void forget_frame_rules(std::uintptr_t lo, std::uintptr_t hi) noexcept {
    try {
        Holding lock;
        if (!lock.held())
            return;
        Table* t = g_table.load(std::memory_order_relaxed);
        if (t != nullptr) {
            for (std::size_t i = 0; i <= t->mask; ++i) {
                const std::uint64_t k = t->slots[i].key.load(std::memory_order_relaxed);
                if (k != kEmpty && k != kForgotten && k >= lo && k < hi) {
                    t->slots[i].key.store(kForgotten, std::memory_order_release);
                    g_rules.fetch_sub(1, std::memory_order_relaxed);
                }
            }
        }
        if (g_as != nullptr)
            unw_flush_cache(g_as, lo, hi);
        rules_table::g_generation.fetch_add(1, std::memory_order_release);
        g_modules.adds = g_modules.subs = ~0ull; // look at the modules again
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

FrameRuleStats frame_rule_stats() noexcept {
    FrameRuleStats s;
    s.rules = g_rules.load(std::memory_order_relaxed);
    s.learnt = g_learnt.load(std::memory_order_relaxed);
    s.learn_ticks = g_learn_ticks.load(std::memory_order_relaxed);
    s.libunwind_steps = g_steps.load(std::memory_order_relaxed);
    s.full_unwinds = g_full.load(std::memory_order_relaxed);
    s.table_bytes = g_table_bytes.load(std::memory_order_relaxed);
    return s;
}

void lock_frame_rules_for_fork() noexcept {
    g_mutex.lock();
}

void unlock_frame_rules_after_fork() noexcept {
    g_mutex.unlock();
}

void clear_frame_rules_for_tests() noexcept {
    forget_frame_rules(0, ~std::uintptr_t{0});
}

} // namespace gpumemprof::stacks
