// SPDX-License-Identifier: MIT
// Streaming trace writer (see format.hpp for the bytes it produces).
#include "trace/writer.hpp"

#include "util/quiet_io.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumemprof::trace {

Writer::~Writer() {
    close();
}

namespace {

/// The pid recorded in the header of an existing trace file: 0 when it is not a trace, -1 when
/// its first bytes cannot be read (then nobody may assume it is free).
int trace_owner(int fd) {
    std::uint8_t head[32];
    ssize_t n = -1;
    do
        n = ::pread(fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if (n < 17 || std::memcmp(head, kFileMagic, 8) != 0)
        return 0;
    const std::uint8_t* p = head + 16;
    std::uint64_t pid = 0;
    if (!read_varint(&p, head + n, &pid) || pid == 0 || pid > 0x3fffffff)
        return 0;
    return static_cast<int>(pid);
}

bool process_alive(int pid) {
    return ::kill(pid, 0) == 0 || errno == EPERM;
}

/// flock(LOCK_EX) on a trace being opened, so that two processes opening one path at the same
/// moment (ranks started together) check and claim it one after the other. Released by closing
/// `fd` (never by LOCK_UN after the close: the number may be the program's by then). Tries
/// without blocking for about a second: a fork child made by another thread meanwhile may hold
/// a copy of a locking fd until it execs.
bool lock_for_open(int fd) {
    for (int i = 0; i < 1000; ++i) {
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
            return true;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return false;
        ::usleep(1000);
    }
    return false;
}

std::string absolute(const std::string& path) {
    if (!path.empty() && path[0] == '/')
        return path;
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr)
        return path;
    return std::string(cwd) + "/" + path;
}

} // namespace

bool Writer::open(const std::string& path, const Header& header, WriterOptions options) {
    close();
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> io(io_mu_);
    if (options.events_per_block == 0)
        options.events_per_block = 1;
    // Keep one block under the reader's payload limit whatever the caller asked for.
    const std::size_t max_events = kMaxBlockPayload / kMaxEventBytes;
    if (options.events_per_block > max_events)
        options.events_per_block = static_cast<std::uint32_t>(max_events);
    options_ = options;
    error_.clear();
    busy_pid_ = 0;
    failed_.store(false, std::memory_order_relaxed);
    total_events_ = total_blocks_ = 0;
    dropped_.store(0, std::memory_order_relaxed);
    used_ = 0;
    count_ = 0;
    state_ = CodecState{};
    path_ = absolute(path); // the program may chdir() later
    // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of blocking; O_NOFOLLOW:
    // a symlink planted at the path is refused (ELOOP). No O_TRUNC before the checks below. Read
    // and write: the header of a trace already there names its owner (a write-only fd cannot
    // read it, and a trace taken as ownerless would be truncated under a live recording).
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        error_ = "cannot create trace file " + path + ": " +
                 (errno == ELOOP ? std::string("it is a symbolic link") : std::string(std::strerror(errno)));
        return false;
    }
    auto refuse = [&](std::string why) {
        ::close(fd);
        error_ = "cannot use trace file " + path + ": " + why;
        return false;
    };
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return refuse(std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        return refuse("not a regular file (a trace is written to a file, never to a FIFO or device)");
    if (st.st_nlink > 1)
        return refuse("it has other hard links");
    // From the owner check to the end of the header: one process at a time (the lock is released
    // when fd is closed, below or in refuse).
    if (!lock_for_open(fd))
        return refuse(std::string("another process keeps it locked (flock: ") + std::strerror(errno) + ")");
    if (::fstat(fd, &st) != 0) // its size now that no other process is claiming it
        return refuse(std::strerror(errno));
    if (st.st_size > 0) {
        const int owner = trace_owner(fd);
        if (owner < 0)
            return refuse(std::string("its header cannot be read to tell whose it is: ") + std::strerror(errno));
        if (owner > 0 && owner != static_cast<int>(::getpid()) && process_alive(owner)) {
            busy_pid_ = owner;
            return refuse("process " + std::to_string(owner) + " is recording into it");
        }
    }
    if (::ftruncate(fd, 0) != 0)
        return refuse(std::strerror(errno));
    dev_ = static_cast<unsigned long long>(st.st_dev);
    ino_ = static_cast<unsigned long long>(st.st_ino);
    const std::vector<std::uint8_t> bytes = encode_header(header);
    const int err = util::write_all_quietly(fd, bytes.data(), bytes.size());
    ::close(fd);
    if (err != 0) {
        error_ = "cannot write trace file " + path + ": " + std::strerror(err);
        return false;
    }
    open_.store(true, std::memory_order_release);
    const std::size_t block_bytes =
        kBlockHeaderBytes + static_cast<std::size_t>(options_.events_per_block) * kMaxEventBytes;
    buf_.assign(block_bytes, 0);
    spare_.assign(block_bytes, 0);
    return true;
}

void Writer::record(const Event& ev) {
    if (!open_.load(std::memory_order_relaxed))
        return;
    std::unique_lock<std::mutex> lock(mu_);
    if (!open_.load(std::memory_order_relaxed))
        return;
    if (failed_.load(std::memory_order_relaxed)) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (ev.time_ns == 0) {
        Event stamped = ev;
        stamped.time_ns = now_ns();
        used_ += encode_event(stamped, state_, buf_.data() + kBlockHeaderBytes + used_);
    } else {
        used_ += encode_event(ev, state_, buf_.data() + kBlockHeaderBytes + used_);
    }
    ++count_;
    ++total_events_;
    if (count_ >= options_.events_per_block || (options_.flush_on_oom && ev.type == EventType::oom))
        ship_block(lock);
}

void Writer::ship_block(std::unique_lock<std::mutex>& lock) {
    if (count_ == 0) {
        lock.unlock();
        return;
    }
    const std::size_t bytes = seal_block(buf_.data(), kBlockMagic, static_cast<std::uint32_t>(used_), count_);
    const std::uint32_t count = count_;
    // io_mu_ before mu_ is released: the next block cannot be written before this one. Holding
    // io_mu_ also means the spare buffer is no longer being written, so it can be swapped in.
    std::unique_lock<std::mutex> io(io_mu_);
    buf_.swap(spare_);
    used_ = 0;
    count_ = 0;
    state_ = CodecState{};
    lock.unlock();
    write_block_io_locked(spare_.data(), bytes, count);
}

void Writer::write_block_io_locked(const std::uint8_t* block, std::size_t bytes, std::uint32_t count) {
    if (write_all_io_locked(block, bytes))
        ++total_blocks_;
    else
        dropped_.fetch_add(count, std::memory_order_relaxed);
}

void Writer::fail_io_locked(std::string message) {
    error_ = std::move(message);
    failed_.store(true, std::memory_order_relaxed);
    if (options_.on_failure)
        options_.on_failure(error_.c_str());
}

bool Writer::write_all_io_locked(const std::uint8_t* data, std::size_t size) {
    if (failed_.load(std::memory_order_relaxed))
        return false;
    // An fd of our own for this write only, checked to be the file we created.
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        fail_io_locked("trace file " + path_ + " cannot be reopened (" + std::strerror(errno) + "): recording stopped");
        return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<unsigned long long>(st.st_dev) != dev_ ||
        static_cast<unsigned long long>(st.st_ino) != ino_) {
        ::close(fd);
        fail_io_locked("trace file " + path_ + " was replaced by another file: recording stopped");
        return false;
    }
    const int err = util::write_all_quietly(fd, data, size);
    ::close(fd);
    if (err != 0) {
        fail_io_locked("trace write to " + path_ + " failed (" + std::strerror(err) +
                       "): recording stopped, later events are not in the trace");
        return false;
    }
    return true;
}

void Writer::flush() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!open_.load(std::memory_order_relaxed) || failed_.load(std::memory_order_relaxed))
        return;
    ship_block(lock);
}

void Writer::write_stacks(const std::vector<Stack>& stacks) {
    // Each stack encoded once, packed into blocks of at most the payload limit (a stack larger
    // than the limit alone is dropped).
    std::vector<std::uint8_t> payload, one;
    std::uint32_t count = 0;
    for (const Stack& s : stacks) {
        one.clear();
        append_stack_head(one, s.id, s.frames.size());
        for (const StackFrame& f : s.frames)
            append_stack_frame(one, f.function, f.file, f.line, f.module, f.offset, f.kind);
        if (one.size() > kMaxBlockPayload)
            continue;
        if (payload.size() + one.size() > kMaxBlockPayload) {
            write_stack_block(payload, count);
            payload.clear();
            count = 0;
        }
        payload.insert(payload.end(), one.begin(), one.end());
        ++count;
    }
    write_stack_block(payload, count);
}

void Writer::write_stack_block(const std::vector<std::uint8_t>& payload, std::uint32_t count) {
    if (count == 0 || payload.size() > kMaxBlockPayload)
        return;
    flush();
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_.load(std::memory_order_relaxed) || failed_.load(std::memory_order_relaxed))
        return;
    std::lock_guard<std::mutex> io(io_mu_);
    std::vector<std::uint8_t> block(kBlockHeaderBytes + payload.size());
    std::copy(payload.begin(), payload.end(), block.begin() + kBlockHeaderBytes);
    const std::size_t total = seal_block(block.data(), kStackMagic, static_cast<std::uint32_t>(payload.size()), count);
    write_all_io_locked(block.data(), total); // not an event block: not counted in the end record
}

void Writer::close() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_.load(std::memory_order_relaxed))
        return;
    std::lock_guard<std::mutex> io(io_mu_); // waits for a write in progress on another thread
    if (!failed_.load(std::memory_order_relaxed)) {
        if (count_ > 0) {
            const auto payload = static_cast<std::uint32_t>(used_);
            write_block_io_locked(buf_.data(), seal_block(buf_.data(), kBlockMagic, payload, count_), count_);
        }
        used_ = 0;
        count_ = 0;
        std::uint8_t rec[kBlockHeaderBytes + 20];
        std::uint8_t* p = rec + kBlockHeaderBytes;
        p = put_varint(p, total_events_ - dropped_.load(std::memory_order_relaxed));
        p = put_varint(p, total_blocks_);
        const auto payload = static_cast<std::uint32_t>(p - (rec + kBlockHeaderBytes));
        write_all_io_locked(rec, seal_block(rec, kEndMagic, payload, 0));
    }
    open_.store(false, std::memory_order_release);
    buf_.clear();
    buf_.shrink_to_fit();
    spare_.clear();
    spare_.shrink_to_fit();
}

std::uint64_t Writer::events_written() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_events_;
}

std::string Writer::error() const {
    std::lock_guard<std::mutex> io(io_mu_);
    return error_;
}

} // namespace gpumemprof::trace
