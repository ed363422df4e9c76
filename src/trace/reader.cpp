// SPDX-License-Identifier: MIT
// Trace reader (schema in format.hpp). Every length is checked against the bytes that exist
// before it is used, so no input makes it read out of bounds or allocate without limit.
#include "trace/reader.hpp"

#include "trace/crc32.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumemprof::trace {
namespace {

std::uint32_t load_u32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

std::string hex32(std::uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

bool read_str(const std::uint8_t** p, const std::uint8_t* end, std::string* out) {
    std::uint64_t n;
    const std::uint8_t* q = *p;
    if (!read_varint(&q, end, &n) || n > static_cast<std::uint64_t>(end - q))
        return false;
    out->assign(reinterpret_cast<const char*>(q), static_cast<std::size_t>(n));
    *p = q + n;
    return true;
}

} // namespace

bool Reader::fail(ReadError kind, std::uint64_t offset, const std::string& what) {
    if (error_kind_ == ReadError::none) {
        error_kind_ = kind;
        error_offset_ = offset;
        error_ = "byte offset " + std::to_string(offset) + ": " + what;
    }
    at_end_ = true;
    return false;
}

bool Reader::load_all_from_fd(int fd, const std::string& path) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        owned_.reserve(static_cast<std::size_t>(st.st_size));
    // Reads exactly `n` more bytes unless the data ends first; false only on a read error.
    bool eof = false;
    auto read_more = [&](std::uint64_t n) {
        std::uint8_t chunk[1 << 16];
        while (n > 0 && !eof) {
            const ssize_t got = ::read(fd, chunk, static_cast<std::size_t>(std::min<std::uint64_t>(n, sizeof chunk)));
            if (got == 0) {
                eof = true;
                break;
            }
            if (got < 0) {
                if (errno == EINTR)
                    continue;
                return fail(ReadError::io, owned_.size(), "cannot read " + path + ": " + std::strerror(errno));
            }
            owned_.insert(owned_.end(), chunk, chunk + got);
            n -= static_cast<std::uint64_t>(got);
        }
        return true;
    };
    // Read no more than the data claims, checking each claim before reading what it covers: a
    // file that is not a trace (/dev/zero, /dev/urandom) costs its first bytes, not a gigabyte
    // or forever. read_header and load_block then report what is wrong with what was read.
    if (!read_more(kFileHeaderFixedBytes))
        return false;
    if (owned_.size() < kFileHeaderFixedBytes || std::memcmp(owned_.data(), kFileMagic, 8) != 0)
        return true;
    const std::uint32_t version = load_u32(owned_.data() + 8);
    if (version < kOldestFormatVersion || version > kFormatVersion)
        return true;
    const std::uint32_t body_len = load_u32(owned_.data() + 12);
    if (body_len > kMaxHeaderBody || !read_more(std::uint64_t{body_len} + 4))
        return !failed();
    while (!eof) {
        const std::size_t at = owned_.size();
        if (!read_more(kBlockHeaderBytes))
            return false;
        if (owned_.size() - at < kBlockHeaderBytes)
            break;
        const std::uint8_t* h = owned_.data() + at;
        const bool is_events = std::memcmp(h, kBlockMagic, 4) == 0;
        const bool is_end = std::memcmp(h, kEndMagic, 4) == 0;
        const bool is_stacks = version >= 2 && std::memcmp(h, kStackMagic, 4) == 0;
        const std::uint32_t len = load_u32(h + 4);
        if ((!is_events && !is_end && !is_stacks) || len > kMaxBlockPayload)
            break;
        if (!read_more(len))
            return false;
        if (is_end) {
            if (!read_more(1))
                return false; // one byte more tells "data after the end record"
            break;
        }
    }
    return true;
}

Reader::~Reader() {
    if (fd_ >= 0)
        ::close(fd_);
}

void Reader::reset() {
    if (fd_ >= 0)
        ::close(fd_);
    fd_ = -1;
    owned_ = {};
    data_ = nullptr;
    path_.clear();
    buf_ = {};
    block_ = nullptr;
    block_offset_ = 0;
    size_ = first_block_ = pos_ = 0;
    cur_ = end_ = nullptr;
    left_in_block_ = 0;
    state_ = CodecState{};
    header_ = Header{};
    stacks_.clear();
    at_end_ = complete_ = false;
    events_read_ = blocks_read_ = 0;
    error_kind_ = ReadError::none;
    error_.clear();
    error_offset_ = 0;
}

bool Reader::open_file(const std::string& path) {
    reset();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(ReadError::io, 0, "cannot open " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        fd_ = fd;
        path_ = path;
        size_ = static_cast<std::uint64_t>(st.st_size);
        return read_header();
    }
    const bool ok = load_all_from_fd(fd, path);
    ::close(fd);
    if (!ok)
        return false;
    data_ = owned_.data();
    size_ = owned_.size();
    return read_header();
}

bool Reader::open_memory(const void* data, std::size_t size) {
    reset();
    data_ = static_cast<const std::uint8_t*>(data);
    size_ = size;
    return read_header();
}

const std::uint8_t* Reader::fetch(std::uint64_t offset, std::size_t n) {
    static const std::uint8_t kNothing[1] = {0}; // open_memory(nullptr, 0), an empty file
    if (fd_ < 0)
        return data_ != nullptr ? data_ + offset : kNothing;
    if (n == 0)
        return kNothing;
    if (buf_.size() < n) {
        try {
            buf_.resize(n);
        } catch (...) { // the Reader never throws: a block it cannot hold is a read error
            fail(ReadError::io, offset,
                 "cannot read " + path_ + ": out of memory for a block of " + std::to_string(n) + " bytes");
            return nullptr;
        }
    }
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::pread(fd_, buf_.data() + got, n - got, static_cast<off_t>(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fail(ReadError::io, offset + got,
                 "cannot read " + path_ + ": " +
                     (r < 0 ? std::strerror(errno) : "the file got shorter while it was read"));
            return nullptr;
        }
        got += static_cast<std::size_t>(r);
    }
    return buf_.data();
}

bool Reader::read_header() {
    const std::uint8_t* data =
        fetch(0, static_cast<std::size_t>(std::min<std::uint64_t>(size_, kFileHeaderFixedBytes)));
    if (data == nullptr)
        return false;
    if (size_ < 8 || std::memcmp(data, kFileMagic, 8) != 0) {
        if (size_ < 8 && (size_ == 0 || std::memcmp(data, kFileMagic, static_cast<std::size_t>(size_)) == 0))
            return fail(ReadError::truncated, size_,
                        "file ends inside the trace header (" + std::to_string(size_) + " bytes)");
        return fail(ReadError::bad_magic, 0, "not a gpumemprof trace (magic \"GPUMEMTR\" expected)");
    }
    if (size_ < kFileHeaderFixedBytes)
        return fail(ReadError::truncated, size_,
                    "file ends inside the trace header (" + std::to_string(size_) + " bytes)");
    header_.version = load_u32(data + 8);
    if (header_.version < kOldestFormatVersion || header_.version > kFormatVersion)
        return fail(ReadError::unsupported_version, 8,
                    "unsupported trace format version " + std::to_string(header_.version) +
                        " (this gpumemprof reads versions " + std::to_string(kOldestFormatVersion) + " to " +
                        std::to_string(kFormatVersion) + ")");
    const std::uint32_t body_len = load_u32(data + 12);
    if (body_len > kMaxHeaderBody)
        return fail(ReadError::corrupt, 12, "header length " + std::to_string(body_len) + " exceeds the limit");
    const std::uint64_t crc_at = kFileHeaderFixedBytes + body_len;
    if (size_ < crc_at + 4)
        return fail(ReadError::truncated, size_,
                    "file ends inside the trace header (needs " + std::to_string(crc_at + 4) + " bytes, has " +
                        std::to_string(size_) + ")");
    data = fetch(0, static_cast<std::size_t>(crc_at + 4));
    if (data == nullptr)
        return false;
    const std::uint32_t stored = load_u32(data + crc_at);
    const std::uint32_t computed = crc32(0, data, static_cast<std::size_t>(crc_at));
    if (stored != computed)
        return fail(ReadError::corrupt, crc_at,
                    "trace header CRC mismatch (stored " + hex32(stored) + ", computed " + hex32(computed) + ")");

    const std::uint8_t* p = data + kFileHeaderFixedBytes;
    const std::uint8_t* end = data + crc_at;
    std::uint64_t n = 0;
    bool ok = read_varint(&p, end, &header_.pid) && read_str(&p, end, &header_.host) &&
              read_str(&p, end, &header_.exe) && read_str(&p, end, &header_.alloc_conf) &&
              read_varint(&p, end, &header_.start_time_ns) && read_varint(&p, end, &n);
    // Each entry takes at least 2 bytes, which bounds n by the body size before reserving.
    ok = ok && n <= static_cast<std::uint64_t>(end - p) / 2;
    for (std::uint64_t i = 0; ok && i < n; ++i) {
        std::uint64_t ord = 0;
        DeviceInfo d;
        ok = read_varint(&p, end, &ord) && ord <= 0xFFFFFFFFu && read_varint(&p, end, &d.total_bytes);
        d.ordinal = static_cast<std::uint32_t>(ord);
        if (ok)
            header_.devices.push_back(d);
    }
    ok = ok && read_varint(&p, end, &n) && n <= static_cast<std::uint64_t>(end - p) / 2;
    for (std::uint64_t i = 0; ok && i < n; ++i) {
        std::pair<std::string, std::string> kv;
        ok = read_str(&p, end, &kv.first) && read_str(&p, end, &kv.second);
        if (ok)
            header_.metadata.push_back(std::move(kv));
    }
    if (!ok)
        return fail(ReadError::corrupt, static_cast<std::uint64_t>(p - data),
                    "trace header body is malformed (field runs past its end)");
    pos_ = first_block_ = crc_at + 4;
    return true;
}

void Reader::rewind() {
    if (first_block_ == 0)
        return; // never opened successfully
    pos_ = first_block_;
    cur_ = end_ = nullptr;
    left_in_block_ = 0;
    state_ = CodecState{};
    state_.version = header_.version;
    at_end_ = complete_ = false;
    events_read_ = blocks_read_ = 0;
    stacks_.clear();
    error_kind_ = ReadError::none;
    error_.clear();
    error_offset_ = 0;
}

bool Reader::load_block() {
    if (pos_ == size_) { // clean end of data: a program that died leaves no end record
        at_end_ = true;
        return false;
    }
    const std::uint64_t at = pos_;
    if (size_ - at < kBlockHeaderBytes)
        return fail(ReadError::truncated, size_,
                    "file ends inside the block header that starts at byte offset " + std::to_string(at));
    const std::uint8_t* h = fetch(at, kBlockHeaderBytes);
    if (h == nullptr)
        return false;
    const bool is_events = std::memcmp(h, kBlockMagic, 4) == 0;
    const bool is_end = std::memcmp(h, kEndMagic, 4) == 0;
    const bool is_stacks = header_.version >= 2 && std::memcmp(h, kStackMagic, 4) == 0;
    if (!is_events && !is_end && !is_stacks)
        return fail(ReadError::corrupt, at,
                    header_.version >= 2 ? "block magic \"GMTB\", \"GMTS\" or \"GMTE\" expected"
                                         : "block magic \"GMTB\" or \"GMTE\" expected");
    const std::uint32_t len = load_u32(h + 4);
    const std::uint32_t count = load_u32(h + 8);
    if (len > kMaxBlockPayload)
        return fail(ReadError::corrupt, at + 4, "block payload length " + std::to_string(len) + " exceeds the limit");
    if (size_ - at - kBlockHeaderBytes < len)
        return fail(ReadError::truncated, size_,
                    "file ends inside the block that starts at byte offset " + std::to_string(at) + " (needs " +
                        std::to_string(kBlockHeaderBytes + len) + " bytes, has " + std::to_string(size_ - at) + ")");
    h = fetch(at, kBlockHeaderBytes + len);
    if (h == nullptr)
        return false;
    block_ = h;
    block_offset_ = at;
    const std::uint32_t stored = load_u32(h + 12);
    const std::uint32_t computed = block_crc(h, len);
    if (stored != computed)
        return fail(ReadError::corrupt, at,
                    "block CRC mismatch (stored " + hex32(stored) + ", computed " + hex32(computed) + ")");
    if ((is_events && count > len / 5) || (is_stacks && count > len / 2)) // an event takes 5 bytes or more, a stack 2
        return fail(ReadError::corrupt, at + 8, "block event count exceeds its payload length");
    pos_ = at + kBlockHeaderBytes + len;
    if (is_stacks) {
        const char* why = nullptr;
        if (!decode_stacks(h + kBlockHeaderBytes, h + kBlockHeaderBytes + len, count, &stacks_, &why))
            return fail(ReadError::corrupt, at, why);
        cur_ = end_ = nullptr;
        left_in_block_ = 0;
        return true; // no events: next() reads on
    }
    if (is_end) {
        const std::uint8_t* p = h + kBlockHeaderBytes;
        std::uint64_t total = 0;
        std::uint64_t blocks = 0;
        if (count != 0 || !read_varint(&p, h + kBlockHeaderBytes + len, &total) ||
            !read_varint(&p, h + kBlockHeaderBytes + len, &blocks))
            return fail(ReadError::corrupt, at, "malformed end record");
        if (total != events_read_ || blocks != blocks_read_)
            return fail(ReadError::corrupt, at,
                        "end record says " + std::to_string(total) + " events in " + std::to_string(blocks) +
                            " blocks, the file holds " + std::to_string(events_read_) + " in " +
                            std::to_string(blocks_read_));
        if (pos_ != size_)
            return fail(ReadError::corrupt, pos_, "data after the end record");
        complete_ = true;
        at_end_ = true;
        return false;
    }
    cur_ = h + kBlockHeaderBytes;
    end_ = cur_ + len;
    left_in_block_ = count;
    state_ = CodecState{};
    state_.version = header_.version;
    ++blocks_read_;
    if (count == 0 && len != 0)
        return fail(ReadError::corrupt, at, "block holds bytes but no events");
    return true;
}

bool Reader::next(Event& ev) {
    if (error_kind_ != ReadError::none)
        return false;
    while (left_in_block_ == 0) {
        if (cur_ != end_) {
            return fail(ReadError::corrupt, offset_of(cur_), "block payload has bytes after its last event");
        }
        if (at_end_ || !load_block())
            return false;
    }
    const char* why = nullptr;
    if (!decode_event(&cur_, end_, state_, &ev, &why))
        return fail(ReadError::corrupt, offset_of(cur_), why);
    --left_in_block_;
    ++events_read_;
    return true;
}

} // namespace gpumemprof::trace
