// SPDX-License-Identifier: MIT
// Recorder: hot-path capture + interning and call-site accounting (see recorder.hpp).
#include "stacks/recorder.hpp"

#include "stacks/backtrace.hpp"
#include "stacks/python_frames.hpp"

#include <algorithm>
#include <new>
#include <pthread.h>

namespace gpumemprof::stacks {

namespace {

/// Stack a capture may need below the caller's frame: libunwind's cursor and context (about
/// 1.5 KB), its DWARF state while it reads .eh_frame, the Python walk and the interning. Below
/// this much room, or off the thread's own stack, the allocation is kept without a stack.
constexpr std::uintptr_t kUnwindStackRoom = 32 * 1024;

/// The calling thread's stack bounds (pthread_getattr_np, once per thread) and its frame buffer:
/// the frames of a capture live here, not on the thread's stack (small stacks: docs/guarantees.md).
struct ThreadCapture {
    std::uintptr_t ips[kMaxFrames + python::kMaxPythonFrames];
};
struct ThreadStack {
    std::uintptr_t lo = 0, hi = 0; // [lo, hi): the stack pthread gave this thread
    bool probed = false;
    bool known = false;
};
thread_local ThreadStack tl_stack;
thread_local ThreadCapture* tl_capture = nullptr;
thread_local bool tl_capture_gone = false;
struct ThreadCaptureHolder {
    ~ThreadCaptureHolder() {
        delete tl_capture;
        tl_capture = nullptr;
        tl_capture_gone = true;
    }
};
thread_local ThreadCaptureHolder tl_capture_holder;

ThreadCapture* thread_capture() noexcept {
    if (tl_capture == nullptr && !tl_capture_gone) {
        tl_capture = new (std::nothrow) ThreadCapture;
        (void)&tl_capture_holder; // registers the thread-exit destructor
    }
    return tl_capture;
}

/// True when the stack pointer `sp` has room for an unwind: it lies on the thread's own stack
/// (not a makecontext coroutine, not a sigaltstack) with kUnwindStackRoom left below it.
/// Threads whose bounds pthread cannot tell are unwound as before.
bool room_to_unwind(std::uintptr_t sp) noexcept {
    ThreadStack& t = tl_stack;
    if (!t.probed) {
        t.probed = true;
        pthread_attr_t attr;
        if (::pthread_getattr_np(::pthread_self(), &attr) == 0) {
            void* addr = nullptr;
            std::size_t size = 0;
            if (::pthread_attr_getstack(&attr, &addr, &size) == 0 && addr != nullptr && size > 0) {
                t.lo = reinterpret_cast<std::uintptr_t>(addr);
                t.hi = t.lo + size;
                t.known = true;
            }
            ::pthread_attr_destroy(&attr);
        }
    }
    if (!t.known)
        return true;
    return sp > t.lo && sp <= t.hi && sp - t.lo >= kUnwindStackRoom;
}

} // namespace

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

// capture()'s caller is this function's caller (capture() is always inlined).
__attribute__((noinline)) StackId Recorder::capture_now() noexcept {
    const int depth = max_depth_.load(std::memory_order_relaxed);
    if (depth <= 0)
        return 0;
    // A small stack (PTHREAD_STACK_MIN threads), a coroutine or a signal's alternate stack: no
    // unwind, whose own frames would overflow it; the block is accounted under "no stack".
    if (!room_to_unwind(reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)))) {
        small_stack_skips_.fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
    ThreadCapture* buffer = thread_capture();
    if (buffer == nullptr)
        return 0;
    std::uintptr_t* ips = buffer->ips;
    const std::uint64_t t0 = util::CycleClock::now();
    // skip = 0 would keep a frame inside capture_now() itself; 1 starts at its caller.
    int n = capture_backtrace(ips, depth, 1);
    // The thread's Python frames follow the native ones (tagged words, innermost first); the
    // reports put them in place of the interpreter's frames (report::resolve_report).
    const int py = python::capture(ips + n, std::min(depth, python::kMaxPythonFrames));
    n += py;
    const std::uint64_t t1 = util::CycleClock::now();
    bool cached = false;
    const StackId id = tree_.intern(ips, n, &cached);
    const std::uint64_t t2 = util::CycleClock::now();
    captures_.fetch_add(1, std::memory_order_relaxed);
    frames_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    if (cached)
        cache_hits_.fetch_add(1, std::memory_order_relaxed);
    if (py > 0) {
        python_captures_.fetch_add(1, std::memory_order_relaxed);
        python_frames_.fetch_add(static_cast<std::uint64_t>(py), std::memory_order_relaxed);
    }
    unwind_ticks_.fetch_add(t1 - t0, std::memory_order_relaxed);
    intern_ticks_.fetch_add(t2 - t1, std::memory_order_relaxed);
    return id;
}

CaptureStats Recorder::capture_stats() const noexcept {
    CaptureStats s;
    s.captures = captures_.load(std::memory_order_relaxed);
    s.frames = frames_.load(std::memory_order_relaxed);
    s.cache_hits = cache_hits_.load(std::memory_order_relaxed);
    s.python_captures = python_captures_.load(std::memory_order_relaxed);
    s.python_frames = python_frames_.load(std::memory_order_relaxed);
    s.small_stack_skips = small_stack_skips_.load(std::memory_order_relaxed);
    const double ns = clock_.ns_per_tick();
    s.unwind_seconds = static_cast<double>(unwind_ticks_.load(std::memory_order_relaxed)) * ns * 1e-9;
    s.intern_seconds = static_cast<double>(intern_ticks_.load(std::memory_order_relaxed)) * ns * 1e-9;
    return s;
}

StackId Recorder::intern(const std::uintptr_t* ips, int n) noexcept {
    return tree_.intern(ips, n);
}

void Recorder::account_alloc(int device, std::uintptr_t ptr, std::size_t size, std::size_t requested,
                             StackId id) noexcept {
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        table_.on_alloc(device, ptr, size, requested, id);
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
    }
}

void Recorder::on_oom(int device, const pool::OomInfo& info, StackId id, std::string suggestion) noexcept {
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        if (ooms_.size() >= 1000)
            return; // a program retrying OOMs in a loop must not grow us without bound
        OomRecord r;
        r.device = device;
        r.info = info;
        r.id = id;
        r.suggestion = std::move(suggestion);
        ooms_.push_back(std::move(r));
    } catch (...) {
    }
}

void Recorder::lock_for_fork() noexcept {
    python::lock_for_fork();
    tree_.mutex().lock();
    mutex_.lock();
}

void Recorder::unlock_after_fork() noexcept {
    mutex_.unlock();
    tree_.mutex().unlock();
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
    for (auto* c :
         {&captures_, &frames_, &cache_hits_, &python_captures_, &python_frames_, &unwind_ticks_, &intern_ticks_})
        c->store(0, std::memory_order_relaxed);
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
    }
    return out;
}

} // namespace gpumemprof::stacks
