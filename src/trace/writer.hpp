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
    /// Called once, with the message, when a write fails and recording stops (under the writer's
    /// I/O lock: must not call back into the writer). Null: error() only.
    void (*on_failure)(const char* message) = nullptr;
};

/// Thread-safe. record() encodes into an in-memory block under mu_ (no system call, no allocation).
/// A full block is written on the thread whose event filled it, but not under mu_: that thread
/// swaps the full buffer with a spare one under mu_, takes io_mu_ before it releases mu_ (so
/// blocks reach the file in the order they were filled), then writes holding io_mu_ only. Other
/// threads keep recording into the fresh buffer meanwhile; one waits for an earlier write only if
/// it fills the next block before that write has finished (two buffers). What this does not
/// change: a caller that holds its own lock around record() (the pool does) still holds it while
/// the block its event completed is written, once per events_per_block events.
///
/// The writer holds no file descriptor between writes (the program may close any fd and reuse
/// its number; docs/guarantees.md): each block is appended through an fd opened for it (O_APPEND, by the
/// absolute path fixed at open()) that must still be the file open() created (same device and
/// inode), and closed right after. Writes raise no signal (util::write_all_quietly).
/// Never throws, never aborts: an I/O error stops recording (later events are dropped, not
/// written) and is kept in error(). A file cut by a crash holds every block written before it.
class Writer {
public:
    Writer() = default;
    ~Writer(); ///< close()
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    /// Create `path` (or empty an existing regular file) and write the file header. Refused, false
    /// with error() set: a symlink at `path` (O_NOFOLLOW), a file that is not regular (a FIFO, a
    /// device: opened without blocking, then refused) or has other hard links, an existing file
    /// whose header cannot be read, and an existing trace whose recording process is still alive
    /// (then busy_pid() is that process: two processes must not write one trace). The check of
    /// the owner and the writing of the new header hold flock on the file, so that processes
    /// opening one path at the same moment take turns: the first records there, the others find
    /// it owned.
    bool open(const std::string& path, const Header& header, WriterOptions options = {});
    /// After a failed open(): the live process that owns the trace at that path, else 0.
    int busy_pid() const { return busy_pid_; }

    /// Append one event. time_ns == 0 is stamped with now_ns(). Safe from any thread; no-op when
    /// not open.
    void record(const Event& ev);

    /// Write the pending block now (a no-op if it is empty).
    void flush();
    /// Write the pending events, then the symbolised stacks their stack ids name (stack blocks
    /// of at most the block payload limit each). Called before close(), once or several times
    /// with a part of the stacks each (so that they need not all be in memory at once).
    void write_stacks(const std::vector<Stack>& stacks);
    /// One stack block of `count` stacks already encoded (append_stack_head/append_stack_frame),
    /// after the pending events; ignored when empty or over the block payload limit.
    void write_stack_block(const std::vector<std::uint8_t>& payload, std::uint32_t count);
    /// Flush, append the end record, close the file. Idempotent.
    void close();

    std::uint64_t events_written() const; ///< events recorded while open, including unflushed
    std::string error() const;

private:
    /// Requires `lock` to hold mu_; returns with mu_ released. Writes the pending block, if any.
    void ship_block(std::unique_lock<std::mutex>& lock);
    /// Requires io_mu_. Writes one sealed block of `count` events; counts it or its events as dropped.
    void write_block_io_locked(const std::uint8_t* block, std::size_t bytes, std::uint32_t count);
    bool write_all_io_locked(const std::uint8_t* data, std::size_t size); // requires io_mu_
    void fail_io_locked(std::string message);                             // requires io_mu_

    // Lock order: mu_, then io_mu_. Nothing takes mu_ while holding io_mu_.
    mutable std::mutex mu_;                // buf_, used_, count_, state_, total_events_, options_
    mutable std::mutex io_mu_;             // the file (writes and close), spare_, total_blocks_, error_
    std::atomic<bool> open_{false};        // changed only with both mutexes held
    std::string path_;                     // absolute path of the trace (io_mu_)
    unsigned long long dev_ = 0, ino_ = 0; // identity of the file open() created (io_mu_)
    int busy_pid_ = 0;
    std::atomic<bool> failed_{false}; // an I/O error happened: stop writing
    WriterOptions options_;
    std::vector<std::uint8_t> buf_;   // block being filled: 16-byte header space, then the payload
    std::vector<std::uint8_t> spare_; // the other buffer: the block being written, or idle
    std::size_t used_ = 0;            // payload bytes in buf_
    std::uint32_t count_ = 0;         // events in buf_
    CodecState state_;
    std::uint64_t total_events_ = 0;
    std::uint64_t total_blocks_ = 0;
    std::atomic<std::uint64_t> dropped_{0}; // events recorded but not written (I/O error)
    std::string error_;
};

} // namespace gpumemprof::trace
