// SPDX-License-Identifier: MIT
// Stack capture: a walk over the calling thread's stack with the shared frame rules. A frame
// costs one lookup in the rules table and one or two reads of the stack, until the walk meets a
// walk the thread remembers (its shadow, below: the walk remembered for the stack pointer of the
// first frame, else the previous walk): from there a frame costs a compare of the one or two
// words that walk read. Per thread: the stack's bounds, the shadow (on the heap) and, on the rare
// fallback, one register context.
#include "stacks/backtrace.hpp"

#include "stacks/frame_rules.hpp"
#include "util/per_thread.hpp"

#include <algorithm>
#include <atomic>
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

struct Shadow;

/// The walk's per-thread state in one place: one %fs-relative address for all of it
/// (initial-exec: the library is preloaded, its TLS is static; the default model would call
/// __tls_get_addr for each variable on every capture).
struct ThreadWalk {
    StackBounds bounds;
    bool bounds_probed = false;
    bool shadow_gone = false;            ///< the thread's shadow was freed at its exit: none from now on
    Shadow* shadow = nullptr;            ///< the shadow of the previous walk (on the heap), made at the first walk
    int shadow_wanted = 0;               ///< frames a walk would have kept had the shadow had room for them
    std::uint32_t walks = 0;             ///< walks with a shadow (counted up to kSlotsAfter)
    std::uint64_t serial = 0;            ///< WalkInfo::serial
    bool latest_kept = false;            ///< the latest walk's result is the shadow's previous walk, entire
    int latest_max = 0, latest_skip = 0; ///< that walk's max_frames and skip
};
thread_local ThreadWalk tl_walk __attribute__((tls_model("initial-exec")));

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

/// A word of the thread's stack. Not checked by AddressSanitizer: the compare with a remembered
/// walk reads the words that walk read, which may now lie in another frame's local variables and
/// their redzones (a fork child on its parent's shadow); the walk's own reads are checked
/// against the stack's bounds.
__attribute__((no_sanitize("address"))) inline std::uintptr_t load(std::uintptr_t addr) noexcept {
    std::uintptr_t v;
    __builtin_memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
    return v;
}

// ---- the shadow of the previous walk ---------------------------------------------------------
// A walk is a function of its state at a frame (pc, sp, bp), the rules of the pcs it meets (the
// same while g_generation is) and the stack words it reads from that frame outward. So a walk
// that reaches a frame in the very state the previous walk had there, while every word that walk
// read from there on still holds what it read, would go on exactly as that one did: it stops
// there and copies the rest (docs/design.md, Stacks).

/// One frame of a remembered walk: its state, and how the walk stepped out of it. What the step
/// read is implied by the next frame's state: the return address (next pc + 1) at next sp - 8
/// and, for a rule that restores bp, next bp at next sp + step; for the kernel's signal frame, the
/// next pc, sp and bp in the ucontext at this sp.
struct WalkFrame {
    std::uintptr_t pc, sp, bp;
    std::int32_t step;   ///< kStepBpKept, kStepSignal, kStepUnsure or the saved bp's offset from the CFA
    std::uint32_t flags; ///< kUsesBp, kBpLive, kCheckBp, kSignalStep
};
/// The step's CFA is bp plus a constant.
constexpr std::uint32_t kUsesBp = 1;
/// The walk from this frame on depends on its bp: a frame from here outward computes its CFA from
/// bp before a step restores bp from the stack (or the walk stopped at its limit with bp kept).
/// Where it is not set, bp is only carried outward, unused, and may differ between two walks.
constexpr std::uint32_t kBpLive = 2;
/// What a later walk compares for the step out of this frame, worked out with kBpLive once the
/// walk is complete: besides the return address, the restored bp (a step that restores a bp that
/// is live in the next frame); or, instead, the kernel's signal frame (pc, sp and, if live, bp).
constexpr std::uint32_t kCheckBp = 4, kSignalStep = 8;
constexpr std::int32_t kStepBpKept = INT32_MIN, kStepSignal = INT32_MIN + 1, kStepUnsure = INT32_MIN + 2;
constexpr std::uintptr_t kSignalGregs = offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, gregs);

/// The walk's loop ends at this many steps (a cycle of frames could go on for ever).
constexpr int kMaxSteps = kMaxFrames + 32;
/// Frames a thread's shadow has room for at first (per walk).
constexpr int kFirstShadowFrames = 32;

/// A walk's header; its frames are in Shadow::frames (see there).
struct Walk {
    int frames;      ///< states kept (0: nothing to compare with)
    int usable_from; ///< a later walk may stop at frame i only if i >= usable_from (the steps out of
                     ///< the frames below came from a table miss or from libunwind)
    bool ended;      ///< the walk stopped by itself after f[frames - 1] (false: at its frame limit)
    int end_reads;   ///< the words that stop read, with their values
    std::uintptr_t end_at[2], end_value[2];
    std::uint64_t generation; ///< rules_table::g_generation when it was walked
};

/// Walks a thread remembers, one per slot: a slot is chosen by the stack pointer at the walk's
/// first frame, so the walks of the different call paths a loop repeats (one framework operator
/// after another, each at its own depth) are each there for the next time that path comes.
/// 64: HF `generate` repeats some 30 paths; with 16 slots a third of its native frames were
/// walked afresh, with 64 a seventh (docs/measurements.md, AQ).
constexpr int kWalkSlots = 64;
constexpr int kWalkSetBits = 5; ///< log2(kWalkSlots / 2): sets of two slots
static_assert(kWalkSlots == 2 << kWalkSetBits);
/// A thread's shadow has one slot until the thread's walks reach this many (a thread that
/// allocates a few times keeps a small shadow: docs/measurements.md, thread_rss).
constexpr std::uint32_t kSlotsAfter = 256;

/// Per thread, on the heap (not on the thread's stack), made at its first walk: the remembered
/// walks and the one being written (slots + 1 walks). Their headers follow this one, then their
/// frames, each walk's in a block of its own (frame i of walk w at frames()[w capacity + i]), as
/// many as the walks' frame limit needs (made again, larger, when a walk asks for more frames or
/// the thread for more slots). Pages no walk has reached are never touched.
struct alignas(16) Shadow {
    std::uint8_t in_slot[kWalkSlots];    ///< the walk remembered for each slot (two slots a set)
    std::uint8_t recent[kWalkSlots / 2]; ///< the slot of each set written last (0 or 1)
    std::uint8_t scratch;                ///< the walk the next walk is written to
    std::uint8_t previous;               ///< the thread's previous walk (in its slot)
    bool busy;    ///< a walk is under way (a signal handler's walk then neither reads nor writes it)
    int capacity; ///< frames each walk has room for
    int slots;    ///< 1 or kWalkSlots
    Walk* walk() noexcept { return reinterpret_cast<Walk*>(this + 1); }
    WalkFrame* frames() noexcept { return reinterpret_cast<WalkFrame*>(walk() + slots + 1); }
    static std::size_t bytes(int capacity, int slots) noexcept {
        return sizeof(Shadow) + static_cast<std::size_t>(slots + 1) * sizeof(Walk) +
               static_cast<std::size_t>(slots + 1) * static_cast<std::size_t>(capacity) * sizeof(WalkFrame);
    }
};
static_assert(sizeof(Shadow) % alignof(Walk) == 0 && sizeof(Walk) % alignof(WalkFrame) == 0);

/// One of the walks: its header and its frames.
struct WalkView {
    Walk* head = nullptr;
    WalkFrame* first = nullptr; ///< its frame 0; frame i is first[i]
    Walk* operator->() const noexcept { return head; }
    WalkFrame& f(int i) const noexcept { return first[i]; }
};
WalkView view(Shadow* sh, int w) noexcept {
    return WalkView{sh->walk() + w,
                    sh->frames() + static_cast<std::size_t>(w) * static_cast<std::size_t>(sh->capacity)};
}
/// The first slot of the set (two slots; one while the thread has one) of a walk whose first
/// frame has this stack pointer (the frames of one capture site differ by 16-byte multiples).
inline int walk_set(std::uintptr_t sp, int slots) noexcept {
    return static_cast<int>(((sp >> 4) * 0x9e3779b97f4a7c15ull) >> (63 - kWalkSetBits)) & (slots - 1) & ~1;
}
/// Whether walk w starts at this very frame (and is usable under these rules).
inline bool starts_at(const WalkView& w, std::uintptr_t sp, std::uintptr_t pc, std::uint64_t generation) noexcept {
    return w->frames > 0 && w->generation == generation && w.f(0).sp == sp && w.f(0).pc == pc;
}
struct ShadowHolder {
    ~ShadowHolder() {
        ::operator delete(tl_walk.shadow);
        tl_walk.shadow = nullptr;
        tl_walk.shadow_gone = true;
    }
};
thread_local ShadowHolder tl_shadow_holder;

/// A shadow with room for `capacity` frames a walk and `slots` walks (the walks are lost when it
/// grows).
__attribute__((noinline)) Shadow* make_shadow(int capacity, int slots) noexcept {
    ThreadWalk& t = tl_walk;
    if (t.shadow_gone)
        return nullptr;
    Shadow* const previous = t.shadow;
    t.shadow = nullptr; // (a signal handler's walk meanwhile makes its own)
    ::operator delete(previous);
    // Uninitialised frames: only those a walk reaches get touched.
    t.shadow = static_cast<Shadow*>(::operator new(Shadow::bytes(capacity, slots), std::nothrow));
    if (t.shadow != nullptr) {
        t.shadow->slots = slots;
        for (int i = 0; i <= slots; ++i)
            t.shadow->walk()[i].frames = 0;
        for (int i = 0; i < kWalkSlots; ++i)
            t.shadow->in_slot[i] = static_cast<std::uint8_t>(i < slots ? i : 0);
        for (std::uint8_t& r : t.shadow->recent)
            r = 0;
        t.shadow->scratch = static_cast<std::uint8_t>(slots);
        t.shadow->previous = 0;
        t.shadow->busy = false;
        t.shadow->capacity = capacity;
    }
    (void)&tl_shadow_holder; // registers the thread-exit destructor
    return t.shadow;
}

/// The calling thread's shadow, with room for `capacity` frames a walk and `slots` walks.
inline Shadow* shadow(int capacity, int slots) noexcept {
    Shadow* s = tl_walk.shadow;
    return s != nullptr && s->capacity >= capacity && s->slots >= slots ? s : make_shadow(capacity, slots);
}

/// The first frame i >= from of walk `w` from which every word it read outward still holds the
/// same value (w->frames when even its last step's reads changed). Every word lies at or above
/// w.f[from].sp, on the thread's stack (each was read there by that walk, within its bounds).
int still_valid_from(const WalkView& w, int from) noexcept {
    for (int k = 0; k < w->end_reads; ++k)
        if (load(w->end_at[k]) != w->end_value[k])
            return w->frames;
    for (int i = w->frames - 2; i >= from; --i) {
        const WalkFrame& a = w.f(i);
        const WalkFrame& b = w.f(i + 1);
        // The bp a step restores is compared only where it matters (kCheckBp, from kBpLive):
        // elsewhere the walk never uses it, and the word is often a caller's register.
        if (__builtin_expect((a.flags & kSignalStep) != 0, 0)) {
            const std::uintptr_t g = a.sp + kSignalGregs;
            if (load(g + REG_RIP * sizeof(greg_t)) != b.pc || load(g + REG_RSP * sizeof(greg_t)) != b.sp ||
                ((b.flags & kBpLive) != 0 && load(g + REG_RBP * sizeof(greg_t)) != b.bp))
                return i + 1;
            continue;
        }
        if (load(b.sp - 8) != b.pc + 1)
            return i + 1;
        if ((a.flags & kCheckBp) != 0 &&
            load(b.sp + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(a.step))) != b.bp)
            return i + 1;
    }
    return from;
}

} // namespace

const StackBounds& thread_stack_bounds() noexcept {
    ThreadWalk& t = tl_walk;
    if (!t.bounds_probed) {
        t.bounds_probed = true;
        probe_bounds(&t.bounds);
    }
    return t.bounds;
}

__attribute__((noinline)) int capture_backtrace(std::uintptr_t* ips, int max_frames, int skip,
                                                WalkInfo* info) noexcept {
    // A result that is not certainly the latest one's: another serial.
    auto another = [info]() noexcept {
        tl_walk.latest_kept = false;
        ++tl_walk.serial;
        if (info != nullptr)
            info->serial = tl_walk.serial;
        return 0;
    };
    if (info != nullptr)
        info->from_shadow = 0;
    if (ips == nullptr || max_frames <= 0)
        return another();
    skip = std::clamp(skip, 0, 16);
    max_frames = std::min(max_frames, kMaxFrames);
    std::uintptr_t pc, sp, bp;
    // This function's own frame: the rule at this very instruction applies to sp and bp here.
    asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
    const StackBounds& b = thread_stack_bounds();
    if (!b.known || sp < b.lo || sp >= b.hi)
        return another(); // not on the thread's own stack (a coroutine, a signal stack) or bounds unknown
    const StackWindow w{sp, b.hi};
    const std::uint64_t generation = rules_table::g_generation.load(std::memory_order_acquire);
    const rules_table::Table* table = rules_table::g_table.load(std::memory_order_acquire);

    // The previous walk (old) and this one (rec); none inside a signal handler that interrupted a
    // walk of this thread. A walk has at most max_frames + skip + 1 frames; the shadow has room
    // for 32, or as many as the thread's walks needed (a walk that runs out of room is not kept,
    // and the next one gets room for twice as many).
    const int most = max_frames + skip + 2;
    Shadow* sh = tl_walk.shadow;
    if (sh != nullptr && sh->busy)
        sh = nullptr; // (before growing it: the interrupted walk is using it)
    else
        sh = shadow(std::min(most, std::max(kFirstShadowFrames, tl_walk.shadow_wanted)),
                    tl_walk.walks >= kSlotsAfter ? kWalkSlots : 1);
    if (sh != nullptr && tl_walk.walks < kSlotsAfter)
        ++tl_walk.walks;
    WalkView old, rec;
    int set = 0;                  // this first frame's set of slots
    int same_at = -1;             // the slot of the set whose walk starts at this very frame
    bool old_is_previous = false; // old is the thread's previous walk
    if (sh != nullptr) {
        sh->busy = true;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        // A walk remembered in this first frame's set that starts at this very frame, else the
        // thread's previous walk (which meets this one further out, where their paths join).
        set = walk_set(sp, sh->slots);
        for (int way = 0; way < (sh->slots > 1 ? 2 : 1) && same_at < 0; ++way)
            if (starts_at(view(sh, sh->in_slot[set + way]), sp, pc, generation))
                same_at = set + way;
        old = view(sh, same_at >= 0 ? sh->in_slot[same_at] : sh->previous);
        old_is_previous = same_at < 0 || sh->in_slot[same_at] == sh->previous;
        rec = view(sh, sh->scratch);
        if (old->frames == 0 || old->generation != generation)
            old = WalkView{};
        rec->frames = 0;
        rec->usable_from = 0;
        rec->ended = false;
        rec->end_reads = 0;
        rec->generation = generation;
    }
    int oi = 0;              // the merge's place in old: the first frame whose sp is not below ours
    int old_valid_from = -1; // still_valid_from(old, ...) once asked (-1: not yet)
    bool keep_old = false;   // this walk is the old one entire: old stays the previous walk
    bool old_entire = false; // ... and old has no frames inside this walk's first one

    int out = 0, seen = 0, j = 0; // j: this walk's frame (state) index
    bool sure = true;             // the step out of frame j is known from the table alone
    bool at_limit = false;        // the loop's step limit stopped the walk
    std::uint32_t uses_bp = 0;    // the step out of frame j computes its CFA from bp
    if (rec.head != nullptr)
        rec.f(0) = WalkFrame{pc, sp, bp, kStepUnsure, 0};
    for (;;) {
        // ---- the shadow: this frame in the previous walk's state, every word it read still there
        if (old.head != nullptr) {
            while (oi < old->frames && old.f(oi).sp < sp)
                ++oi;
            if (oi < old->frames && old.f(oi).sp == sp && old.f(oi).pc == pc &&
                (old.f(oi).bp == bp || (old.f(oi).flags & kBpLive) == 0) && oi >= old->usable_from) {
                if (old_valid_from < 0)
                    old_valid_from = still_valid_from(old, oi);
                if (oi >= old_valid_from) {
                    // The rest of this walk is old's from oi: copy it. old's frame k is this
                    // walk's j + (k - oi); each is a frame seen, kept once `skip` were seen.
                    const int m = old->frames;
                    int k = oi + 1;
                    const int skipped = std::min(std::max(skip - seen, 0), m - k);
                    k += skipped;
                    seen += skipped;
                    const int copied = std::min(m - k, max_frames - out);
                    for (int t = 0; t < copied; ++t)
                        ips[out + t] = old.f(k + t).pc;
                    out += copied;
                    seen += copied;
                    k += copied;
                    const bool full = out >= max_frames;
                    if (info != nullptr)
                        info->from_shadow = copied;
                    // old's frames oi .. k-1 are this walk's j .. j + (k-1-oi).
                    const int last = j + (k - 1 - oi);
                    if (rec.head != nullptr) {
                        if (j == 0 && k == m && !full && old->ended) {
                            keep_old = true; // the same walk from its first frame: nothing to copy
                            old_entire = oi == 0;
                        } else if (last < sh->capacity) {
                            for (int t = 0; t < k - oi; ++t)
                                rec.f(j + t) = old.f(oi + t);
                        } else {
                            tl_walk.shadow_wanted = std::min(most, 2 * sh->capacity);
                            rec = WalkView{}; // no room to keep this walk
                        }
                    }
                    if (full || (k == m && old->ended)) {
                        if (rec.head != nullptr && !keep_old) {
                            rec->frames = last + 1;
                            rec->ended = !full;
                            if (!full) {
                                rec->end_reads = old->end_reads;
                                for (int e = 0; e < old->end_reads; ++e) {
                                    rec->end_at[e] = old->end_at[e];
                                    rec->end_value[e] = old->end_value[e];
                                }
                            }
                        }
                        goto done;
                    }
                    // old stopped at its frame limit, this one goes on from old's last frame (whose
                    // bp is live there: the same as this walk's).
                    j = last;
                    pc = old.f(m - 1).pc;
                    sp = old.f(m - 1).sp;
                    bp = old.f(m - 1).bp;
                    if (rec.head != nullptr)
                        rec.f(j).step = kStepUnsure;
                    old = WalkView{};
                }
            }
        }
        if (j >= kMaxSteps) {
            at_limit = true; // (not reached: the frame limit comes first)
            break;
        }
        // ---- one step with the rules: frame j -> frame j + 1
        FrameRule r;
        sure = true;
        if (!rules_table::find(table, pc, &r)) {
            r = frame_rule(FrameRegs{pc, sp, bp}, w);
            table = rules_table::g_table.load(std::memory_order_acquire); // may have grown
            sure = false; // a rule not (yet) in the table: the next walk may step otherwise
        }
        uses_bp = r.kind == FrameRule::cfa_bp || r.kind == FrameRule::other ? kUsesBp : 0;
        std::int32_t step = kStepBpKept;
        std::uintptr_t cfa;
        if (r.kind == FrameRule::cfa_sp) {
            cfa = sp + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(r.cfa_offset));
        } else if (r.kind == FrameRule::cfa_bp) {
            cfa = bp + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(r.cfa_offset));
        } else if (r.kind == FrameRule::sigreturn) {
            // The kernel's frame: the interrupted registers are in the ucontext at sp; the
            // interrupted pc is exact (not a return address).
            const std::uintptr_t gregs = sp + kSignalGregs;
            if (!w.holds(gregs, sizeof(gregset_t)))
                break;
            const std::uintptr_t next_pc = load(gregs + REG_RIP * sizeof(greg_t));
            const std::uintptr_t next_sp = load(gregs + REG_RSP * sizeof(greg_t));
            if (next_sp <= sp || !w.holds(next_sp, 0) || next_pc < 0x4000) {
                if (rec.head != nullptr) {
                    rec->end_reads = 2;
                    rec->end_at[0] = gregs + REG_RIP * sizeof(greg_t);
                    rec->end_value[0] = next_pc;
                    rec->end_at[1] = gregs + REG_RSP * sizeof(greg_t);
                    rec->end_value[1] = next_sp;
                }
                break;
            }
            bp = load(gregs + REG_RBP * sizeof(greg_t));
            sp = next_sp;
            pc = next_pc;
            step = kStepSignal;
            goto stepped;
        } else if (r.kind == FrameRule::other) {
            FrameRegs f{pc, sp, bp};
            const int stepped = step_with_libunwind(&f, w);
            if (stepped == 0 || (stepped > 0 && f.sp <= sp)) {
                sure = false;
                break;
            }
            if (stepped < 0) {
                // A frame that needs more registers than pc, sp and bp: libunwind unwinds the
                // whole stack again from a complete context.
                if (rec.head != nullptr)
                    rec->frames = 0; // nothing to remember
                rec = WalkView{};
                keep_old = false;
                Fallback* fb = fallback();
                if (fb == nullptr || ::getcontext(&fb->uc) != 0)
                    goto done;
                const int n = unwind_with_libunwind(&fb->uc, ips, max_frames, skip, w);
                if (n > out)
                    out = n;
                goto done;
            }
            pc = f.pc;
            sp = f.sp;
            bp = f.bp;
            sure = false; // what libunwind read is not known here
            goto stepped;
        } else {
            break; // last, stop
        }
        // Every read lies in [sp, top of the stack): cfa > sp is checked first.
        if (cfa <= sp || cfa > w.hi)
            break;
        {
            const std::uintptr_t ra = load(cfa - 8);
            if (r.bp_offset != FrameRule::kBpKept) {
                const std::uintptr_t at = cfa + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(r.bp_offset));
                if (!w.holds(at, 8) || at < sp)
                    break;
                bp = load(at);
                step = r.bp_offset;
            }
            if (ra < 0x4000) {
                if (rec.head != nullptr) {
                    rec->end_reads = 1;
                    rec->end_at[0] = cfa - 8;
                    rec->end_value[0] = ra;
                }
                break; // the end, or nothing sensible
            }
            sp = cfa;
            pc = ra - 1;
        }
    stepped:
        if (rec.head != nullptr) {
            rec.f(j).step = sure ? step : kStepUnsure;
            rec.f(j).flags = uses_bp;
            if (!sure)
                rec->usable_from = j + 1;
            if (j + 1 < sh->capacity) {
                rec.f(j + 1) = WalkFrame{pc, sp, bp, kStepUnsure, 0};
            } else {
                tl_walk.shadow_wanted = std::min(most, 2 * sh->capacity);
                rec = WalkView{}; // no room to keep this walk
            }
        }
        ++j;
        if (seen++ >= skip && (ips[out++] = pc, out >= max_frames)) {
            if (rec.head != nullptr)
                rec->frames = j + 1; // ended stays false: stopped at the limit
            goto done;
        }
    }
    // The walk stopped by itself after frame j (a break above). A stop decided by a rule not in the
    // table, or by libunwind, may not be the next walk's: then no frame of this one is usable.
    if (rec.head != nullptr) {
        rec->frames = j + 1;
        rec->ended = !at_limit;
        if (!sure)
            rec->usable_from = j + 1;
        rec.f(j).flags = at_limit ? kUsesBp : uses_bp; // what the stop looked at
    }
done:
    if (rec.head != nullptr && !keep_old && rec->frames > 0) {
        // Where bp matters, from the outermost frame in (see kBpLive).
        bool live = !rec->ended; // a walk stopped at its limit: the frames past it may use bp
        for (int i = rec->frames - 1; i >= 0; --i) {
            WalkFrame& f = rec.f(i);
            const bool carried = f.step == kStepBpKept || f.step == kStepUnsure;
            // The step out of f restores the bp of the next frame (whose liveness `live` is
            // still, before this line) from the stack: compared only if that bp is live.
            const std::uint32_t check = f.step == kStepSignal                         ? kSignalStep
                                        : (!carried && live && f.step != kStepSignal) ? kCheckBp
                                                                                      : 0;
            live = (f.flags & kUsesBp) != 0 || (carried && live);
            f.flags = (f.flags & kUsesBp) | (live ? kBpLive : 0) | check;
        }
    }
    if (sh != nullptr) {
        if (!keep_old) {
            // rec (possibly empty) is the previous walk now, remembered in its first frame's set:
            // in place of the walk there that started at the same frame, else of the one of the
            // two written less recently. The walk it replaces is the next one's scratch.
            const int slot = sh->slots == 1 ? set : same_at >= 0 ? same_at : set + (sh->recent[set / 2] ^ 1);
            if (sh->slots > 1)
                sh->recent[set / 2] = static_cast<std::uint8_t>(slot - set);
            const std::uint8_t replaced = sh->in_slot[slot];
            sh->in_slot[slot] = sh->scratch;
            sh->previous = sh->scratch;
            sh->scratch = replaced;
        } else {
            sh->previous = static_cast<std::uint8_t>(old.head - sh->walk());
        }
        // The same result as the latest walk's: this walk is the previous one entire, and that
        // one's result was all of it, with the same limits.
        ThreadWalk& t = tl_walk;
        const bool same = keep_old && old_entire && old_is_previous && t.latest_kept && t.latest_max == max_frames &&
                          t.latest_skip == skip;
        t.latest_kept = (keep_old && old_entire) || (rec.head != nullptr && !keep_old && rec->frames > 0);
        t.latest_max = max_frames;
        t.latest_skip = skip;
        if (!same)
            ++t.serial;
        if (info != nullptr)
            info->serial = t.serial;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        sh->busy = false;
    } else {
        another();
    }
    return out;
}

int latest_walk_sps(std::uintptr_t* sps, int max, int skip, std::uint64_t serial) noexcept {
    const ThreadWalk& t = tl_walk;
    Shadow* sh = t.shadow;
    if (sps == nullptr || sh == nullptr || sh->busy || !t.latest_kept || skip != t.latest_skip || serial != t.serial)
        return 0;
    // latest_kept: the previous walk is that walk entire, its frame 0 the walk's own; ips[0] was
    // its frame skip + 1.
    const WalkView w = view(sh, sh->previous);
    int n = 0;
    for (int k = skip + 1; k < w->frames && n < max && n < t.latest_max; ++k)
        sps[n++] = w.f(k).sp;
    return n;
}

std::vector<unsigned char> save_walk_shadow_for_tests() {
    std::vector<unsigned char> v;
    if (Shadow* sh = tl_walk.shadow; sh != nullptr && !sh->busy) {
        v.resize(Shadow::bytes(sh->capacity, sh->slots));
        std::memcpy(v.data(), static_cast<const void*>(sh), v.size());
    }
    return v;
}

bool load_walk_shadow_for_tests(const std::vector<unsigned char>& bytes) {
    if (bytes.size() < sizeof(Shadow))
        return false;
    Shadow head;
    std::memcpy(static_cast<void*>(&head), bytes.data(), sizeof(Shadow));
    if (head.slots != 1 && head.slots != kWalkSlots)
        return false;
    Shadow* sh = tl_walk.shadow;
    if (sh == nullptr || sh->capacity != head.capacity || sh->slots != head.slots)
        sh = make_shadow(head.capacity, head.slots);
    if (sh == nullptr || sh->busy || bytes.size() != Shadow::bytes(head.capacity, head.slots))
        return false;
    std::memcpy(static_cast<void*>(sh), bytes.data(), bytes.size());
    sh->busy = false;
    return true;
}

} // namespace gpumemprof::stacks
