// SPDX-License-Identifier: MIT
// Trace reader: validates the header and each block (length, CRC) and iterates the events.
#pragma once

#include "trace/format.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpumemprof::trace {

enum class ReadError {
    none,
    io,                  ///< the file cannot be opened or read
    bad_magic,           ///< not a gpumemprof trace (offset 0) or a block without a known magic
    unsupported_version, ///< format version other than kFormatVersion (offset 8)
    truncated,           ///< the data ends inside the header or inside a block
    corrupt,             ///< CRC mismatch, impossible length, undecodable event
};

/// Never throws. Usage: open_*(); then `while (r.next(ev)) ...;` then check r.failed().
/// Events of a block are delivered only after its CRC matched, so a truncated or corrupt file
/// yields exactly the events of the blocks before the damaged one, then the error.
/// A regular file is read a block at a time (memory: one block, whatever the file's size; the
/// file as long as it was at open_file); anything else (a pipe, a device) is read whole first,
/// no further than its headers claim.
class Reader {
public:
    Reader() = default;
    ~Reader();
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    bool open_file(const std::string& path);
    /// Read from memory the caller keeps alive while reading.
    bool open_memory(const void* data, std::size_t size);

    const Header& header() const { return header_; }
    bool next(Event& ev);
    /// Start again at the first event (after a successful open; clears a read error).
    void rewind();

    bool failed() const { return error_kind_ != ReadError::none; }
    ReadError error_kind() const { return error_kind_; }
    /// Human-readable, starting with "byte offset N: " where the problem is.
    const std::string& error() const { return error_; }
    std::uint64_t error_offset() const { return error_offset_; }

    /// True once the end record was read (the recording program closed the trace).
    bool complete() const { return complete_; }
    std::uint64_t events_read() const { return events_read_; }
    std::uint64_t blocks_read() const { return blocks_read_; }
    std::uint64_t file_size() const { return size_; }
    /// Symbolised stacks of the stack blocks read so far (version 2; they follow the events, so
    /// they are all known once next() has returned false without an error).
    const std::vector<Stack>& stacks() const { return stacks_; }

private:
    void reset();
    bool load_all_from_fd(int fd, const std::string& path);
    /// `n` bytes at `offset` (all within size_): a pointer into the data, or into buf_ for a
    /// streamed file (valid until the next fetch); nullptr after an I/O error (failed() then).
    const std::uint8_t* fetch(std::uint64_t offset, std::size_t n);
    bool read_header();
    bool load_block();
    bool fail(ReadError kind, std::uint64_t offset, const std::string& what);
    /// File offset of the decoding position `p` inside the current block.
    std::uint64_t offset_of(const std::uint8_t* p) const {
        return block_offset_ + static_cast<std::uint64_t>(p - block_);
    }

    std::vector<std::uint8_t> owned_;
    const std::uint8_t* data_ = nullptr; // the whole data (memory, or a file read whole), else null
    int fd_ = -1;                        // a regular file read a block at a time
    std::string path_;
    std::vector<std::uint8_t> buf_; // the streamed block (or header)
    const std::uint8_t* block_ = nullptr;
    std::uint64_t block_offset_ = 0; // file offset of block_
    std::uint64_t size_ = 0;
    std::uint64_t first_block_ = 0;     // offset of the first block header
    std::uint64_t pos_ = 0;             // offset of the next block header
    const std::uint8_t* cur_ = nullptr; // decoding position inside the current block payload
    const std::uint8_t* end_ = nullptr;
    std::uint32_t left_in_block_ = 0;
    CodecState state_;
    Header header_;
    std::vector<Stack> stacks_;
    bool at_end_ = false;
    bool complete_ = false;
    std::uint64_t events_read_ = 0;
    std::uint64_t blocks_read_ = 0;
    ReadError error_kind_ = ReadError::none;
    std::string error_;
    std::uint64_t error_offset_ = 0;
};

} // namespace gpumemprof::trace
