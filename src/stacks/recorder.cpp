// SPDX-License-Identifier: MIT
// Recorder: hot-path capture + interning and call-site accounting (see recorder.hpp).
#include "stacks/recorder.hpp"

#include "stacks/backtrace.hpp"
#include "stacks/eval_loop_sites.hpp"
#include "stacks/frame_rules.hpp"
#include "stacks/python_frames.hpp"
#include "util/per_thread.hpp"
#include "util/swallowed.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <new>

namespace gpumemprof::stacks {

namespace {

struct ThreadCapture;
void release_stats(ThreadCapture* c) noexcept;
/// Per thread: the frames of the current capture and of the previous one (two buffers, swapped),
/// on the heap, not on the thread's stack (small stacks: docs/guarantees.md). A capture equal to
/// the previous one, word for word, is the previous one's id: no hash, no lookup (and, when both
/// walks say so, no compare either).
struct ThreadCapture {
    ~ThreadCapture() { release_stats(this); } // at the thread's exit (util::PerThread)
    std::uintptr_t words[2][kMaxFrames + python::kMaxPythonFrames];
    int current = 0;     ///< the buffer the next capture is written to
    int previous_n = -1; ///< frames of the previous capture (the other buffer)
    StackId previous_id = 0;
    std::uint64_t previous_tree = 0;          ///< generation of the tree previous_id belongs to
    std::uint64_t stats_owner = 0;            ///< the recorder whose counters `stats` is
    detail::CaptureCounters* stats = nullptr; ///< that recorder's counters for this thread
    /// The walks' serials of the previous capture (WalkInfo::serial, python::capture): when both
    /// come back unchanged, its words are this capture's, without comparing them.
    std::uint64_t previous_native = 0, previous_python = 0;
};
ThreadCapture* thread_capture() noexcept {
    return util::PerThread<ThreadCapture>::get();
}

std::atomic<std::uint64_t> g_next_recorder{1};

/// Per thread: the sampling draw, and the weight of the allocation the latest capture was for
/// (on_alloc takes it). Plain data: no constructor, no thread-exit work.
struct SampleState {
    std::uint64_t rng;      ///< xorshift64*; 0: not seeded yet
    std::int64_t countdown; ///< smaller allocations left before the next sampled one
    std::uint64_t recorder; ///< the recorder the pending weight is for
    StackId pending_id;
    std::uint32_t pending_weight;
    bool pending;
};
thread_local SampleState tl_sample;

std::uint64_t next_random(SampleState& s) noexcept {
    if (s.rng == 0)
        s.rng = (reinterpret_cast<std::uintptr_t>(&s) ^ util::CycleClock::now()) | 1;
    s.rng ^= s.rng >> 12;
    s.rng ^= s.rng << 25;
    s.rng ^= s.rng >> 27;
    return s.rng * 0x2545f4914f6cdd1dull;
}

/// Smaller allocations to skip before the next sampled one: geometric with mean one_in - 1, the
/// same as drawing each allocation with probability 1/one_in.
std::int64_t draw_skip(SampleState& s, std::uint32_t one_in) noexcept {
    const double u = (static_cast<double>(next_random(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    const double skip = std::floor(std::log(u) / std::log1p(-1.0 / static_cast<double>(one_in)));
    return skip < 0 ? 0 : (skip > 1e15 ? static_cast<std::int64_t>(1e15) : static_cast<std::int64_t>(skip));
}

} // namespace

/// One thread's capture counters for one recorder: written by that thread only (a load and a
/// store, no read-modify-write), read by capture_stats.
struct detail::CaptureCounters {
    std::atomic<std::uint64_t> captures{0}, frames{0}, cache_hits{0}, shadow_hits{0}, shadow_frames{0},
        python_captures{0}, python_frames{0}, python_compared{0}, python_trusted{0}, small_stack_skips{0},
        unwind_ticks{0}, python_ticks{0}, intern_ticks{0}, sampled_out{0};
    CaptureCounters* next = nullptr;      ///< the recorder's list of every block (push only)
    CaptureCounters* next_free = nullptr; ///< on the free list
    CaptureCounters* next_made = nullptr; ///< every block ever made (g_all_counters: never freed)
    CountersFreeList* free_list = nullptr;
    static void add(std::atomic<std::uint64_t>& c, std::uint64_t d) noexcept {
        c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    }
    /// Every counter above back to zero (a fork child counts its own captures only).
    void clear() noexcept {
        std::atomic<std::uint64_t>* const all[] = {
            &captures,        &frames,        &cache_hits,      &shadow_hits,    &shadow_frames,
            &python_captures, &python_frames, &python_compared, &python_trusted, &small_stack_skips,
            &unwind_ticks,    &python_ticks,  &intern_ticks,    &sampled_out};
        static_assert(sizeof all / sizeof all[0] * sizeof(std::atomic<std::uint64_t>) ==
                          offsetof(CaptureCounters, next),
                      "clear() names every counter");
        for (auto* c : all)
            c->store(0, std::memory_order_relaxed);
    }
};

/// Blocks of exited threads: pushed without a lock at thread exit, taken under the recorder's
/// stats_mutex_ (one taker at a time, so no ABA).
struct detail::CountersFreeList {
    std::atomic<CaptureCounters*> head{nullptr};
    CountersFreeList* next_made = nullptr; ///< every list ever made (g_all_lists)
};

namespace {
// Blocks and free lists outlive the recorders made in tests; kept reachable from here, they are
// what they are: memory held on purpose, not a leak.
std::atomic<detail::CaptureCounters*> g_all_counters{nullptr};
std::atomic<detail::CountersFreeList*> g_all_lists{nullptr};

template <typename T> void push_made(std::atomic<T*>& head, T* x) noexcept {
    T* h = head.load(std::memory_order_relaxed);
    do {
        x->next_made = h;
    } while (!head.compare_exchange_weak(h, x, std::memory_order_release, std::memory_order_relaxed));
}

detail::CountersFreeList* make_free_list() noexcept {
    auto* l = new (std::nothrow) detail::CountersFreeList;
    if (l != nullptr)
        push_made(g_all_lists, l);
    return l;
}
} // namespace

namespace {
void release_stats(ThreadCapture* c) noexcept {
    // The block stays in its recorder's list (its counts are the recorder's) and goes to the next
    // thread that needs one. Blocks and free lists are never freed, so this is safe even after a
    // recorder made by a test was destroyed.
    if (c == nullptr || c->stats == nullptr)
        return;
    detail::CaptureCounters* b = c->stats;
    detail::CountersFreeList* list = b->free_list;
    c->stats = nullptr;
    c->stats_owner = 0;
    detail::CaptureCounters* head = list->head.load(std::memory_order_relaxed);
    do {
        b->next_free = head;
    } while (!list->head.compare_exchange_weak(head, b, std::memory_order_release, std::memory_order_relaxed));
}
} // namespace

Recorder::Recorder() : id_(g_next_recorder.fetch_add(1, std::memory_order_relaxed)), free_blocks_(make_free_list()) {
}

detail::CaptureCounters* Recorder::stats_block() noexcept {
    ThreadCapture* c = thread_capture();
    if (c != nullptr && c->stats_owner == id_)
        return c->stats;
    if (free_blocks_ == nullptr)
        return nullptr;
    try {
        detail::CaptureCounters* b = nullptr;
        if (free_blocks_->head.load(std::memory_order_acquire) != nullptr) {
            // An exited thread's block. One taker at a time (the lock), so a block cannot be
            // taken, reused and pushed back between our load of the head and our exchange.
            std::lock_guard<std::mutex> lock(stats_mutex_);
            b = free_blocks_->head.load(std::memory_order_acquire);
            while (b != nullptr &&
                   !free_blocks_->head.compare_exchange_weak(b, b->next_free, std::memory_order_acquire))
                ;
        }
        if (b == nullptr) {
            // A new block, on the recorder's list without a lock: the list only grows.
            b = new detail::CaptureCounters;
            b->free_list = free_blocks_;
            push_made(g_all_counters, b);
            detail::CaptureCounters* head = stats_head_.load(std::memory_order_relaxed);
            do {
                b->next = head;
            } while (!stats_head_.compare_exchange_weak(head, b, std::memory_order_release, std::memory_order_relaxed));
        }
        if (c != nullptr) {
            release_stats(c); // the block of the recorder this thread used before
            c->stats_owner = id_;
            c->stats = b;
        }
        return b;
    } catch (...) {
        return nullptr;
    }
}

int Recorder::configure(int max_depth) noexcept {
    max_depth = std::clamp(max_depth, 0, kMaxFrames);
    const int previous = max_depth_.exchange(max_depth, std::memory_order_relaxed);
    if (max_depth > 0) {
        accounting_.store(true, std::memory_order_relaxed);
    } else {
        // Off from the start (nothing accounted yet): no lock on the hot path at all.
        std::lock_guard<std::mutex> lock(mutex_);
        if (table_.empty())
            accounting_.store(false, std::memory_order_relaxed);
    }
    return previous;
}

std::uint32_t Recorder::sample(std::size_t requested, std::uint32_t one_in) noexcept {
    SampleState& s = tl_sample;
    std::uint32_t weight = 1;
    if (requested < always_from_.load(std::memory_order_relaxed)) {
        if (s.countdown > 0) {
            --s.countdown;
            weight = 0;
        } else {
            s.countdown = draw_skip(s, one_in);
            weight = one_in;
        }
    }
    if (weight == 0) {
        s.recorder = id_;
        s.pending_id = 0;
        s.pending_weight = 0;
        s.pending = true;
        if (detail::CaptureCounters* stats = stats_block())
            detail::CaptureCounters::add(stats->sampled_out, 1);
    }
    return weight;
}

std::uint32_t Recorder::weight_of(StackId id) noexcept {
    SampleState& s = tl_sample;
    if (!s.pending || s.recorder != id_ || s.pending_id != id)
        return 1;
    s.pending = false;
    return s.pending_weight;
}

void Recorder::set_sampling(std::size_t always_from, std::uint32_t one_in) noexcept {
    always_from_.store(always_from, std::memory_order_relaxed);
    one_in_.store(one_in, std::memory_order_relaxed);
}

__attribute__((always_inline)) inline StackId Recorder::unwind_and_intern() noexcept {
    const int depth = max_depth_.load(std::memory_order_relaxed);
    if (depth <= 0)
        return 0;
    detail::CaptureCounters* stats = stats_block();
    // A small stack (PTHREAD_STACK_MIN threads), a coroutine or a signal's alternate stack: no
    // unwind, whose own frames would overflow it; the block is accounted under "no stack".
    if (!room_to_unwind(reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)))) {
        if (stats != nullptr)
            detail::CaptureCounters::add(stats->small_stack_skips, 1);
        return 0;
    }
    ThreadCapture* c = thread_capture();
    if (c == nullptr)
        return 0;
    std::uintptr_t* ips = c->words[c->current];
    const std::uint64_t t0 = util::CycleClock::now();
    // skip = 0 would keep a frame inside capture_now() itself (unwind_and_intern is inlined into
    // it); 1 starts at its caller.
    WalkInfo walk;
    int n = capture_backtrace(ips, depth, 1, &walk);
    // The thread's Python frames follow the native ones (tagged words, innermost first); the
    // reports put them in place of the interpreter's frames (report::resolve_report).
    std::uint64_t python_serial = 0;
    int python_compared = 0;
    int python_trusted = 0;
    const std::uint64_t t_python = util::CycleClock::now();
    const int py = python::capture(ips + n, std::min(depth, python::kMaxPythonFrames), &python_serial, &python_compared,
                                   &python_trusted);
    n += py;
    const std::uint64_t t1 = util::CycleClock::now();
    bool cached = false;
    StackId id = 0;
    const bool same_walks = walk.serial == c->previous_native && python_serial == c->previous_python;
    c->previous_native = walk.serial;
    c->previous_python = python_serial;
    if (n > 0 && n == c->previous_n && c->previous_tree == tree_.generation() &&
        (same_walks || std::memcmp(ips, c->words[c->current ^ 1], static_cast<std::size_t>(n) * sizeof *ips) == 0)) {
        id = c->previous_id; // the same stack as this thread's previous capture
        cached = true;
    } else {
        TraceTree::Previous previous;
        if (c->previous_n > 0 && c->previous_tree == tree_.generation()) {
            previous.ips = c->words[c->current ^ 1];
            previous.n = c->previous_n;
            previous.id = c->previous_id;
        }
        id = tree_.intern(ips, n, &cached, previous);
        // A stack the cache did not know: where its eval loop calls are (eval_loop_sites.hpp),
        // from this very walk, before the thread walks again.
        if (!cached && py > 0)
            eval_loop::learn(ips, n - py, 1, walk.serial);
        c->previous_n = id != 0 ? n : -1;
        c->previous_id = id;
        c->previous_tree = tree_.generation();
        c->current ^= 1;
    }
    const std::uint64_t t2 = util::CycleClock::now();
    if (stats != nullptr) {
        detail::CaptureCounters::add(stats->captures, 1);
        detail::CaptureCounters::add(stats->frames, static_cast<std::uint64_t>(n));
        if (cached)
            detail::CaptureCounters::add(stats->cache_hits, 1);
        if (walk.from_shadow > 0) {
            detail::CaptureCounters::add(stats->shadow_hits, 1);
            detail::CaptureCounters::add(stats->shadow_frames, static_cast<std::uint64_t>(walk.from_shadow));
        }
        if (py > 0) {
            detail::CaptureCounters::add(stats->python_captures, 1);
            detail::CaptureCounters::add(stats->python_frames, static_cast<std::uint64_t>(py));
            detail::CaptureCounters::add(stats->python_compared, static_cast<std::uint64_t>(python_compared));
            detail::CaptureCounters::add(stats->python_trusted, static_cast<std::uint64_t>(python_trusted));
        }
        detail::CaptureCounters::add(stats->python_ticks, t1 - t_python);
        detail::CaptureCounters::add(stats->unwind_ticks, t1 - t0);
        detail::CaptureCounters::add(stats->intern_ticks, t2 - t1);
    }
    return id;
}

// capture()'s caller is this function's caller (capture() is always inlined).
__attribute__((noinline)) StackId Recorder::capture_now(std::uint32_t weight) noexcept {
    const StackId id = unwind_and_intern();
    if (one_in_.load(std::memory_order_relaxed) > 1) {
        SampleState& s = tl_sample;
        s.recorder = id_;
        s.pending_id = id;
        s.pending_weight = weight;
        s.pending = true;
    }
    return id;
}

CaptureStats Recorder::capture_stats() const noexcept {
    CaptureStats s;
    std::uint64_t unwind = 0, python = 0, intern = 0;
    try {
        for (const detail::CaptureCounters* b = stats_head_.load(std::memory_order_acquire); b != nullptr;
             b = b->next) {
            s.captures += b->captures.load(std::memory_order_relaxed);
            s.frames += b->frames.load(std::memory_order_relaxed);
            s.cache_hits += b->cache_hits.load(std::memory_order_relaxed);
            s.shadow_hits += b->shadow_hits.load(std::memory_order_relaxed);
            s.shadow_frames += b->shadow_frames.load(std::memory_order_relaxed);
            s.python_captures += b->python_captures.load(std::memory_order_relaxed);
            s.python_frames += b->python_frames.load(std::memory_order_relaxed);
            s.python_compared += b->python_compared.load(std::memory_order_relaxed);
            s.python_trusted += b->python_trusted.load(std::memory_order_relaxed);
            s.small_stack_skips += b->small_stack_skips.load(std::memory_order_relaxed);
            s.sampled_out += b->sampled_out.load(std::memory_order_relaxed);
            unwind += b->unwind_ticks.load(std::memory_order_relaxed);
            python += b->python_ticks.load(std::memory_order_relaxed);
            intern += b->intern_ticks.load(std::memory_order_relaxed);
        }
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    const FrameRuleStats rules = frame_rule_stats();
    s.unwind_rules = rules.rules;
    s.unwind_learnt = rules.learnt;
    s.libunwind_steps = rules.libunwind_steps;
    s.full_unwinds = rules.full_unwinds;
    try {
        s.tree_nodes = tree_.size();
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    s.sample_one_in = one_in_.load(std::memory_order_relaxed);
    s.sample_always_from = always_from_.load(std::memory_order_relaxed);
    const double ns = clock_.ns_per_tick();
    s.unwind_seconds = static_cast<double>(unwind) * ns * 1e-9;
    s.intern_seconds = static_cast<double>(intern) * ns * 1e-9;
    s.python_seconds = static_cast<double>(python) * ns * 1e-9;
    // (Learnt inside captures, so within unwind_seconds; the process's table, as the rules are.)
    s.learn_seconds = std::min(static_cast<double>(rules.learn_ticks) * ns * 1e-9, s.unwind_seconds);
    return s;
}

StackId Recorder::intern(const std::uintptr_t* ips, int n) noexcept {
    return tree_.intern(ips, n);
}

void Recorder::account_alloc(int device, std::uintptr_t ptr, std::size_t size, std::size_t requested,
                             StackId id) noexcept {
    try {
        const std::uint32_t weight = one_in_.load(std::memory_order_relaxed) > 1 ? weight_of(id) : 1;
        std::lock_guard<std::mutex> lock(mutex_);
        table_.on_alloc(device, ptr, size, requested, id, weight);
    } catch (...) {
        // Out of memory while growing a table: this event is lost, the program is not harmed.
    }
}

StackId Recorder::account_free(int device, std::uintptr_t ptr) noexcept {
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        return table_.on_free(device, ptr);
    } catch (...) {
        return 0;
    }
}

void Recorder::on_acquire(int device, std::size_t bytes, StackId id) noexcept {
    if (!accounting_.load(std::memory_order_relaxed))
        return; // capture never on: no call sites to account to (and no lock on the hot path)
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        table_.on_acquire(device, bytes, id);
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
}

std::uint64_t Recorder::on_oom(int device, const pool::OomInfo& info, StackId id, std::string suggestion) noexcept {
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        if (ooms_.size() >= kMaxOoms)
            return 0; // a program retrying OOMs in a loop must not grow us without bound
        OomRecord r;
        r.device = device;
        r.info = info;
        r.id = id;
        r.suggestion = std::move(suggestion);
        r.seq = ++oom_seq_;
        ooms_.push_back(std::move(r));
        return oom_seq_;
    } catch (...) {
        return 0;
    }
}

void Recorder::lock_for_fork() noexcept {
    python::lock_for_fork();
    lock_frame_rules_for_fork();
    tree_.mutex().lock();
    mutex_.lock();
    stats_mutex_.lock();
}

void Recorder::unlock_after_fork() noexcept {
    stats_mutex_.unlock();
    mutex_.unlock();
    tree_.mutex().unlock();
    unlock_frame_rules_after_fork();
    python::unlock_after_fork();
}

void Recorder::reset_after_fork() noexcept {
    // Called by the core in a fork child at its first CUDA use, not in the atfork handler: it
    // frees memory, which a child of a multi-threaded program must not do before it has to
    // (docs/guarantees.md). The locks are free: the prepare handler took them, the child's
    // handler released them.
    std::lock_guard<std::mutex> lock(mutex_);
    table_.clear();
    ooms_.clear();
    for (detail::CaptureCounters* b = stats_head_.load(std::memory_order_acquire); b != nullptr; b = b->next)
        b->clear();
}

std::vector<std::pair<StackId, std::int64_t>> Recorder::live_by_site(int device) const noexcept {
    std::vector<std::pair<StackId, std::int64_t>> out;
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        table_.live_by_site(device, &out);
    } catch (...) {
        out.clear();
    }
    return out;
}

ReportData Recorder::collect(bool site_frames) const {
    ReportData out;
    try {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            table_.collect(&out);
            out.ooms = ooms_;
        }
        // Frames are read outside the accounting lock (the tree has its own; ids never change).
        if (site_frames)
            for (SiteData& s : out.sites)
                s.frames = tree_.frames(s.id);
        for (OomRecord& o : out.ooms)
            o.frames = tree_.frames(o.id);
        out.capture = capture_stats();
    } catch (...) {
        GPUMEMPROF_SWALLOWED();
    }
    return out;
}

} // namespace gpumemprof::stacks
