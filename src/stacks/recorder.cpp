// SPDX-License-Identifier: MIT
// Recorder: hot-path capture + interning and call-site accounting (see recorder.hpp).
#include "stacks/recorder.hpp"

#include "stacks/backtrace.hpp"

#include <algorithm>
#include <new>

namespace gpumemprof::stacks {

Recorder& Recorder::instance() {
    // Deliberately leaked: hooks may run during static destruction (frees in other objects'
    // destructors) and the exit report must still see a live recorder.
    static Recorder* r = new Recorder();
    return *r;
}

void Recorder::configure(int max_depth) noexcept {
    max_depth_.store(std::clamp(max_depth, 0, kMaxFrames), std::memory_order_relaxed);
}

__attribute__((noinline)) StackId Recorder::capture() noexcept {
    const int depth = max_depth_.load(std::memory_order_relaxed);
    if (depth <= 0)
        return 0;
    std::uintptr_t ips[kMaxFrames];
    // skip = 0 would keep a frame inside capture() itself; 1 starts at its caller.
    const int n = capture_backtrace(ips, depth, 1);
    return tree_.intern(ips, n);
}

StackId Recorder::intern(const std::uintptr_t* ips, int n) noexcept {
    return tree_.intern(ips, n);
}

void Recorder::on_alloc(int device, std::uintptr_t ptr, std::size_t size, std::size_t requested,
                        StackId id) noexcept {
    if (max_depth_.load(std::memory_order_relaxed) <= 0)
        return; // capture off: no call sites to account to (and no lock on the hot path)
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        table_.on_alloc(device, ptr, size, requested, id);
    } catch (...) {
        // Out of memory while growing a table: this event is lost, the program is not harmed.
    }
}

void Recorder::on_free(int device, std::uintptr_t ptr) noexcept {
    if (max_depth_.load(std::memory_order_relaxed) <= 0)
        return; // capture off: no call sites to account to (and no lock on the hot path)
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        table_.on_free(device, ptr);
    } catch (...) {
    }
}

void Recorder::on_acquire(int device, std::size_t bytes, StackId id) noexcept {
    if (max_depth_.load(std::memory_order_relaxed) <= 0)
        return; // capture off: no call sites to account to (and no lock on the hot path)
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
    tree_.mutex().lock();
    mutex_.lock();
}

void Recorder::unlock_after_fork() noexcept {
    mutex_.unlock();
    tree_.mutex().unlock();
}

void Recorder::reset_after_fork() noexcept {
    // Whatever thread held these at fork time does not exist in the child.
    new (&mutex_) std::mutex();
    tree_.reinit_lock_after_fork();
    table_.reset_live();
    ooms_.clear();
}

ReportData Recorder::collect() const {
    ReportData out;
    try {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            table_.collect(&out);
            out.ooms = ooms_;
        }
        // Frames are read outside the accounting lock (the tree has its own; ids never change).
        for (SiteData& s : out.sites)
            s.frames = tree_.frames(s.id);
        for (OomRecord& o : out.ooms)
            o.frames = tree_.frames(o.id);
    } catch (...) {
    }
    return out;
}

} // namespace gpumemprof::stacks
