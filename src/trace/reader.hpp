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
class Reader {
public:
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
    bool load_all_from_fd(int fd, const std::string& path);
    bool read_header();
    bool load_block();
    bool fail(ReadError kind, std::uint64_t offset, const std::string& what);

    std::vector<std::uint8_t> owned_;
    const std::uint8_t* data_ = nullptr;
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
