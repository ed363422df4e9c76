// SPDX-License-Identifier: MIT
// OomNotices (see oom_notices.hpp).
#include "core/oom_notices.hpp"

#include "util/swallowed.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <new>

namespace gpumemprof::core {

OomNotices& OomNotices::instance() {
    static auto* n = new OomNotices(); // leaked: OOMs may be reported during static destruction
    return *n;
}

void OomNotices::add(const OomNotice& n) noexcept {
    int fd = -1;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++count_;
        try {
            if (kept_.size() < kMaxKept)
                kept_.push_back(n);
        } catch (...) {
            GPUMEMPROF_SWALLOWED();
        }
        fd = fd_;
    }
    if (fd >= 0) {
        const std::uint64_t one = 1;
        (void)!::write(fd, &one, sizeof one); // non-blocking; a full counter already wakes readers
    }
}

std::int64_t OomNotices::count() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
}

bool OomNotices::get(std::int64_t index, OomNotice* out) const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index < 0 || static_cast<std::size_t>(index) >= kept_.size() || out == nullptr)
        return false;
    *out = kept_[static_cast<std::size_t>(index)];
    return true;
}

int OomNotices::fd() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0)
        fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd_;
}

void OomNotices::reset_after_fork() noexcept {
    // The parent's eventfd is shared with the child: the child's OOMs must not wake the parent.
    new (&mutex_) std::mutex();
    if (fd_ >= 0)
        ::close(fd_);
    fd_ = -1;
    // Abandoned, not cleared: a fork child must not free memory before it has to (docs/guarantees.md, Processes).
    new (&kept_) std::vector<OomNotice>();
    count_ = 0;
}

} // namespace gpumemprof::core
