// SPDX-License-Identifier: MIT
// Streaming trace writer: buffers encoded events and appends one CRC-checked block per flush.
#pragma once

#include "trace/format.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpumemprof::trace {

struct WriterOptions {
    /// A block is written after this many events (and on flush()/close()).
    std::uint32_t events_per_block = 4096;
    /// Write the pending block right after an oom event: an OOM is often followed by a crash.
    bool flush_on_oom = true;
};

/// Thread-safe. record() encodes into an in-memory block under a mutex (no system call, no
/// allocation); the block is written with one write(2) when full. Never throws, never aborts: an
/// I/O error stops recording (later events are counted in dropped()) and is kept in error().
class Writer {
public:
    Writer() = default;
    ~Writer(); ///< close()
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    /// Create/truncate `path` (O_CLOEXEC) and write the file header. False with error() set on
    /// failure.
    bool open(const std::string& path, const Header& header, WriterOptions options = {});
    bool is_open() const { return fd_.load(std::memory_order_acquire) >= 0; }

    /// Append one event. time_ns == 0 is stamped with now_ns(). Safe from any thread; no-op when
    /// not open.
    void record(const Event& ev);

    /// Write the pending block now (a no-op if it is empty).
    void flush();
    /// Flush, append the end record, close the file. Idempotent.
    void close();

    std::uint64_t events_written() const; ///< events recorded while open, including unflushed
    std::uint64_t dropped() const;        ///< events lost to an I/O error
    std::string error() const;

private:
    void write_block_locked(); // requires mu_
    bool write_all_locked(const std::uint8_t* data, std::size_t size);

    mutable std::mutex mu_;
    std::atomic<int> fd_{-1};
    WriterOptions options_;
    std::vector<std::uint8_t> buf_; // 16-byte block header space, then the payload
    std::size_t used_ = 0;          // payload bytes in buf_
    std::uint32_t count_ = 0;       // events in buf_
    CodecState state_;
    std::uint64_t total_events_ = 0;
    std::uint64_t total_blocks_ = 0;
    std::uint64_t dropped_ = 0;
    std::string error_;
};

} // namespace gpumemprof::trace
