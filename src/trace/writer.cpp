// SPDX-License-Identifier: MIT
// Streaming trace writer (see format.hpp for the bytes it produces).
#include "trace/writer.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace gpumemprof::trace {

Writer::~Writer() { close(); }

bool Writer::open(const std::string& path, const Header& header, WriterOptions options) {
    close();
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> io(io_mu_);
    if (options.events_per_block == 0) options.events_per_block = 1;
    // Keep one block under the reader's payload limit whatever the caller asked for.
    const std::size_t max_events = kMaxBlockPayload / kMaxEventBytes;
    if (options.events_per_block > max_events) options.events_per_block = static_cast<std::uint32_t>(max_events);
    options_ = options;
    error_.clear();
    failed_.store(false, std::memory_order_relaxed);
    total_events_ = total_blocks_ = 0;
    dropped_.store(0, std::memory_order_relaxed);
    used_ = 0;
    count_ = 0;
    state_ = CodecState{};
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        error_ = "cannot create trace file " + path + ": " + std::strerror(errno);
        return false;
    }
    fd_.store(fd, std::memory_order_release);
    const std::vector<std::uint8_t> bytes = encode_header(header);
    if (!write_all_io_locked(bytes.data(), bytes.size())) {
        ::close(fd);
        fd_.store(-1, std::memory_order_release);
        return false;
    }
    const std::size_t block_bytes =
        kBlockHeaderBytes + static_cast<std::size_t>(options_.events_per_block) * kMaxEventBytes;
    buf_.assign(block_bytes, 0);
    spare_.assign(block_bytes, 0);
    return true;
}

void Writer::record(const Event& ev) {
    if (fd_.load(std::memory_order_relaxed) < 0) return;
    std::unique_lock<std::mutex> lock(mu_);
    if (fd_.load(std::memory_order_relaxed) < 0) return;
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
    if (write_all_io_locked(block, bytes)) ++total_blocks_;
    else dropped_.fetch_add(count, std::memory_order_relaxed);
}

bool Writer::write_all_io_locked(const std::uint8_t* data, std::size_t size) {
    if (failed_.load(std::memory_order_relaxed)) return false;
    const int fd = fd_.load(std::memory_order_relaxed);
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            error_ = std::string("trace write failed: ") + std::strerror(errno);
            failed_.store(true, std::memory_order_relaxed);
            return false;
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

void Writer::flush() {
    std::unique_lock<std::mutex> lock(mu_);
    if (fd_.load(std::memory_order_relaxed) < 0 || failed_.load(std::memory_order_relaxed)) return;
    ship_block(lock);
}

void Writer::write_stacks(const std::vector<Stack>& stacks) {
    flush();
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_.load(std::memory_order_relaxed) < 0 || failed_.load(std::memory_order_relaxed))
        return;
    std::lock_guard<std::mutex> io(io_mu_);
    std::size_t i = 0;
    while (i < stacks.size()) {
        // As many stacks as fit in one block (a stack larger than the limit alone is dropped).
        std::vector<Stack> part;
        std::size_t bytes = 0;
        for (; i < stacks.size(); ++i) {
            const std::size_t n = encode_stacks({stacks[i]}).size();
            if (n > kMaxBlockPayload) continue;
            if (bytes + n > kMaxBlockPayload) break;
            bytes += n;
            part.push_back(stacks[i]);
        }
        if (part.empty()) continue;
        const std::vector<std::uint8_t> payload = encode_stacks(part);
        std::vector<std::uint8_t> block(kBlockHeaderBytes + payload.size());
        std::copy(payload.begin(), payload.end(), block.begin() + kBlockHeaderBytes);
        const std::size_t total = seal_block(block.data(), kStackMagic, static_cast<std::uint32_t>(payload.size()),
                                             static_cast<std::uint32_t>(part.size()));
        write_all_io_locked(block.data(), total); // not an event block: not counted in the end record
    }
}

void Writer::close() {
    std::lock_guard<std::mutex> lock(mu_);
    const int fd = fd_.load(std::memory_order_relaxed);
    if (fd < 0) return;
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
    ::close(fd);
    fd_.store(-1, std::memory_order_release);
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
