// SPDX-License-Identifier: MIT
// Whole files written atomically: each to a new temporary file beside it, then rename(2). A file
// can be written in pieces (AtomicFile, an OutputSink) or given whole (write_files_atomic).
#pragma once

#include "util/output_sink.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumemprof::util {

/// One file of a report, streamed to a temporary name beside `path` and renamed into place by
/// commit(); destroyed uncommitted, the temporary file is removed. The temporary file is created
/// exclusively (O_EXCL|O_NOFOLLOW: a file or symlink planted at its name is never written
/// through); its name is `<path>.tmp.<pid>.<n>`, with the last component of `path` shortened as
/// much as needed for the name to fit NAME_MAX (a valid final name always gets a valid temporary
/// one). No descriptor is held between writes: the data are buffered and each chunk is appended
/// through an fd opened for it (O_APPEND|O_NOFOLLOW), checked to be the file created (device and
/// inode), and closed at once. Writes raise no signal (util::write_all_quietly). Never throws.
class AtomicFile final : public OutputSink {
public:
    AtomicFile() = default;
    ~AtomicFile() override; ///< discard() unless committed
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    /// Creates the temporary file. False, with error() naming the path and the OS error: an
    /// existing `path` that is not a regular file (a FIFO, a device, a directory; left alone),
    /// or no temporary file could be created.
    bool create(const std::string& path) noexcept;
    /// Buffers `data` (writes a chunk when the buffer is full). False once the file has failed.
    bool write(std::string_view data) noexcept override;
    /// Writes what is buffered. False (error() set) if any write of the file failed.
    bool finish() noexcept;
    /// finish(), then renames the temporary file into place.
    bool commit() noexcept;
    /// Removes the temporary file (a no-op once committed).
    void discard() noexcept;

    const std::string& error() const { return error_; }
    const std::string& path() const { return path_; }
    std::uint64_t bytes() const { return bytes_; } ///< written or buffered so far

private:
    bool flush_buffer() noexcept;
    bool fail(std::string message) noexcept;

    std::string path_, tmp_, buf_, error_;
    unsigned long long dev_ = 0, ino_ = 0; // identity of the temporary file created
    std::uint64_t bytes_ = 0;
    bool created_ = false, failed_ = false, committed_ = false;
};

/// How many AtomicFiles are being written in this process now (created, neither committed nor
/// discarded): a report is being written. Async-signal-safe.
int files_being_written() noexcept;

/// `path` + `suffix`, the last component of `path` shortened (by whole UTF-8 characters) as much
/// as needed for the result's last component to fit NAME_MAX: a name beside `path` that a valid
/// `path` can always have.
std::string with_suffix(const std::string& path, const std::string& suffix);

/// The temporary name beside `path` for attempt `n` of process `pid`: `<path>.tmp.<pid>.<n>`
/// through with_suffix (exposed for tests).
std::string temp_name(const std::string& path, int pid, unsigned n);

/// Renames every file into place, in order, after all have been finished: all or nothing as far
/// as a full disk goes (a rename needs no new space). False with *error on the first failure;
/// the uncommitted ones are discarded.
bool commit_all(const std::vector<AtomicFile*>& files, std::string* error) noexcept;

/// Write each (path, content) pair, all or nothing: every temporary file is written first; only
/// when all are complete are they renamed into place (a full disk leaves none of them written).
/// The rules of AtomicFile. Returns true on success; on failure false with *error naming the
/// path and the OS error; never throws; leaves no temporary file behind.
bool write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files,
                        std::string* error = nullptr) noexcept;

/// One file: the same rules.
bool write_file_atomic(const std::string& path, std::string_view content, std::string* error = nullptr) noexcept;

} // namespace gpumemprof::util
