// SPDX-License-Identifier: MIT
// GPUMEMPROF_TRACE event log: the on-disk schema, the in-memory Event/Header, and the codec.
//
// ======================================= SCHEMA (version 3) =======================================
// Fixed-width integers are little-endian. varint = unsigned LEB128 (7 bits per byte, lowest group
// first, high bit set on every byte but the last; at most 10 bytes). zvarint = a signed 64-bit value
// v stored as the varint of its zigzag form (v << 1) ^ (v >> 63). str = varint byte count, then the
// bytes (UTF-8, no terminator). CRC-32 is the IEEE 802.3 / zlib crc32 (poly 0xEDB88320, init and
// final xor 0xFFFFFFFF), so Python's zlib.crc32 computes the same value.
//
// File := FileHeader Block* [EndRecord]
//
// FileHeader:
//   offset 0     u8[8]  magic "GPUMEMTR"
//   offset 8     u32    format version (3; versions 1 and 2 are read too: version 1 has no stack
//                       blocks, neither has event extensions). A reader rejects any other value.
//   offset 12    u32    L = byte length of the header body (at most 16 MiB)
//   offset 16    u8[L]  header body:
//                         varint pid
//                         str    host
//                         str    exe               (path of the recorded program)
//                         str    alloc_conf        (PYTORCH_CUDA_ALLOC_CONF-syntax text in force)
//                         varint start_time_ns     (Unix epoch nanoseconds, 0 = unknown)
//                         varint D, then D x { varint device ordinal, varint total bytes (0 = unknown) }
//                         varint K, then K x { str key, str value }   (free-form, e.g. "source")
//                       Bytes after the last field, inside L, are ignored (room for later fields).
//   offset 16+L  u32    CRC-32 of bytes [0, 16+L)
//
// Block (EventBlock, StackBlock or EndRecord) := 16-byte block header, then the payload:
//   u8[4] magic "GMTB" (event block), "GMTS" (stack block, version 2) or "GMTE" (end record,
//         written by Writer::close)
//   u32   P = payload length (at most 64 MiB)
//   u32   N = number of events (stacks for a stack block; 0 for the end record)
//   u32   CRC-32 of the 8 bytes (P, N) followed by the P payload bytes
//   u8[P] payload
// Every block is written with one write(2) after it is complete, so a file cut by a crash holds
// every block flushed before it; a block that is cut short is detected (length or CRC).
//
// EventBlock payload := exactly N events, using exactly P bytes. The delta state (previous time,
// device, stream, ptr, stack id, context, pool id) is 0 at the start of every block, so each
// block decodes alone.
// Event:
//   u8      tag: bits 0-3 = EventType (1..12), bit 4 = device follows, bit 5 = stream follows,
//           bit 6 = stack id follows (an absent field equals the previous event's in this block),
//           bit 7 = an extension byte follows (version 3; must be 0 in versions 1 and 2)
//   u8      extension (only if tag bit 7): bit 0 = context follows, bit 1 = pool id follows
//           (absent: the previous event's in this block); bits 2-7 reserved, must be 0; a
//           writer sets bit 7 of the tag only when some bit here is set
//   zvarint time_ns - previous time_ns
//   varint  device            (if bit 4)
//   varint  stream            (if bit 5)
//   zvarint ptr - previous ptr
//   varint  size
//   zvarint block_size - size
//   varint  stack_id          (if bit 6)
//   varint  context           (if extension bit 0)
//   varint  pool id, first    (if extension bit 1; then the second half:)
//   varint  pool id, second
//   varint  device_free       (only when type == oom)
//   varint  largest_free      (only when type == oom, version 2: the pool's largest free cached block)
//
// StackBlock payload (version 2; written before the end record by the recording program, so that
// `gpumemprof report` can name the call sites on any machine): exactly N stacks, using exactly P
// bytes:
//   varint  stack_id          (as in the events; 0 is never written)
//   varint  F = frames, then F x { str function, str file, varint line, str module,
//                                  varint offset in the module, str kind }
//           innermost first, symbolised (function demangled, "" when unknown); kind "" = native,
//           "python" for a Python frame
// Stack blocks are not counted in the end record.
//
// EndRecord payload: varint total events in the file, varint number of event blocks.
// A file without an end record was not closed (the program died): its blocks are still valid.
//
// Every event belongs to one device, one context of it and one memory pool of that context:
//   context  the recording program's number for the CUDA context the event happened in
//            (gpumemprof writes the context's index, the JSON's "context"); each (device, context)
//            has its own pools, and replay keeps them apart. Every event of a version 1 or 2 file
//            has context 0
//   pool id  PyTorch's MempoolId_t, a pair of u64: (0, 0) is the context's default pool; any
//            other pair names a private pool (a CUDA graph's, or a torch.cuda.MemPool) whose
//            blocks only requests to that pool id may reuse
//
// EventType and the meaning of the fields (unused fields are 0):
//   1 alloc           ptr = block handed out, size = requested bytes, block_size = rounded block
//                     size, stream, stack_id = call stack of the allocation
//   2 free_requested  ptr, size = requested bytes of the block, block_size, stream, stack_id of the
//                     free call (0 = unknown)
//   3 free_completed  ptr, size, block_size, stream: the block became reusable
//   4 segment_alloc   ptr = segment base, size = segment bytes, stream
//   5 segment_free    ptr = segment base, size = segment bytes, stream
//   6 vmm_map         ptr = first mapped address, size = mapped bytes
//   7 vmm_unmap       ptr = first unmapped address, size = unmapped bytes
//   8 oom             size = requested bytes, block_size = segment bytes the pool tried to get,
//                     device_free = free bytes the device reported, stream, stack_id
//   9 live_block      a block that was already allocated when recording started (converted
//                     snapshots): replayed as an allocation before everything else; fields as alloc
//  10 device_info     size = total bytes of `device` (for devices first seen after the header was
//                     written; overrides a header capacity of 0)
//  11 step            the program marked the start of a step (gpumemprof_mark_step): size = the
//                     step's number; device, stream, ptr, stack_id unused. A reader older than
//                     this event rejects it as an unknown event type.
//  12 empty_cache     the program emptied the cache of (device, context)'s allocator
//                     (torch.cuda.empty_cache(), gpumemprof_empty_cache): replay empties it there
// ==================================================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumemprof::trace {

inline constexpr char kFileMagic[8] = {'G', 'P', 'U', 'M', 'E', 'M', 'T', 'R'};
inline constexpr char kBlockMagic[4] = {'G', 'M', 'T', 'B'};
inline constexpr char kEndMagic[4] = {'G', 'M', 'T', 'E'};
inline constexpr char kStackMagic[4] = {'G', 'M', 'T', 'S'};
inline constexpr std::uint32_t kFormatVersion = 3;
inline constexpr std::uint32_t kOldestFormatVersion = 1;
inline constexpr std::size_t kFileHeaderFixedBytes = 16;
inline constexpr std::size_t kBlockHeaderBytes = 16;
inline constexpr std::uint32_t kMaxHeaderBody = 16u << 20;
inline constexpr std::uint32_t kMaxBlockPayload = 64u << 20;
/// Upper bound of one encoded event: tag, extension byte, 12 varints of at most 10 bytes.
inline constexpr std::size_t kMaxEventBytes = 2 + 12 * 10;

enum class EventType : std::uint8_t {
    alloc = 1,
    free_requested = 2,
    free_completed = 3,
    segment_alloc = 4,
    segment_free = 5,
    vmm_map = 6,
    vmm_unmap = 7,
    oom = 8,
    live_block = 9,
    device_info = 10,
    step = 11,
    empty_cache = 12,
};
inline constexpr std::uint8_t kMaxEventType = 12;

/// PyTorch's MempoolId_t: (0, 0) is the default pool, any other pair a private pool.
using PoolId = std::pair<std::uint64_t, std::uint64_t>;
inline constexpr PoolId kDefaultPool{0, 0};

struct Event {
    EventType type = EventType::alloc;
    std::uint32_t device = 0;
    std::uint64_t stream = 0;
    std::uint64_t ptr = 0;
    std::uint64_t size = 0;
    std::uint64_t block_size = 0;
    std::uint64_t stack_id = 0;
    std::uint64_t time_ns = 0;
    std::uint64_t device_free = 0;  ///< oom only
    std::uint64_t largest_free = 0; ///< oom only (version 2)
    std::uint64_t context = 0;      ///< the recording's number for the context (version 3)
    PoolId pool_id = kDefaultPool;  ///< memory pool within the context (version 3)
    bool operator==(const Event&) const = default;
};

/// One symbolised frame of a stack block.
struct StackFrame {
    std::string function;
    std::string file;
    std::uint32_t line = 0;
    std::string module;
    std::uint64_t offset = 0; ///< address within the module (shown when there is no file)
    std::string kind;         ///< "" native, "python"
    bool operator==(const StackFrame&) const = default;
};

struct Stack {
    std::uint64_t id = 0;
    std::vector<StackFrame> frames; ///< innermost first
    bool operator==(const Stack&) const = default;
};

/// The payload of one stack block for `stacks` (encode), and its reading (decode: false with
/// `*why` on malformed bytes).
std::vector<std::uint8_t> encode_stacks(const std::vector<Stack>& stacks);
/// The same bytes appended piece by piece, with no Stack made: a stack's head (its id and
/// number of frames), then each of its frames, innermost first.
void append_stack_head(std::vector<std::uint8_t>& out, std::uint64_t id, std::uint64_t frames);
void append_stack_frame(std::vector<std::uint8_t>& out, std::string_view function, std::string_view file,
                        std::uint32_t line, std::string_view module, std::uint64_t offset, std::string_view kind);
bool decode_stacks(const std::uint8_t* p, const std::uint8_t* end, std::uint32_t count, std::vector<Stack>* out,
                   const char** why);

struct DeviceInfo {
    std::uint32_t ordinal = 0;
    std::uint64_t total_bytes = 0; ///< 0 = unknown
    bool operator==(const DeviceInfo&) const = default;
};

struct Header {
    std::uint32_t version = kFormatVersion; ///< filled by the reader; the writer always writes kFormatVersion
    std::uint64_t pid = 0;
    std::string host;
    std::string exe;
    std::string alloc_conf;
    std::uint64_t start_time_ns = 0;
    std::vector<DeviceInfo> devices;
    std::vector<std::pair<std::string, std::string>> metadata;
    bool operator==(const Header&) const = default;
};

/// Delta state shared by the encoder and decoder of one block.
struct CodecState {
    std::uint64_t time_ns = 0;
    std::uint64_t ptr = 0;
    std::uint64_t stream = 0;
    std::uint64_t stack_id = 0;
    std::uint64_t context = 0;
    PoolId pool_id = kDefaultPool;
    std::uint32_t device = 0;
    std::uint32_t version = kFormatVersion; ///< of the file: which fields an event has
};

/// Encode one event at `out` (room for kMaxEventBytes); returns the bytes written. With
/// state.version below 3 the context and pool id are not written (they read back as 0).
std::size_t encode_event(const Event& ev, CodecState& state, std::uint8_t* out);

/// Decode one event from [*p, end). On success advances *p and returns true; otherwise returns
/// false with `*why` set (the caller knows the offset of *p) and leaves *p where the problem is.
bool decode_event(const std::uint8_t** p, const std::uint8_t* end, CodecState& state, Event* ev, const char** why);

/// One varint from [*p, end); false (and *p unchanged) if it is cut short or exceeds 64 bits.
bool read_varint(const std::uint8_t** p, const std::uint8_t* end, std::uint64_t* v);

/// Write v as a varint at `out` (room for 10 bytes); returns the byte after it.
std::uint8_t* put_varint(std::uint8_t* out, std::uint64_t v);

/// The CRC field of the block at `block` (16-byte header, then `payload_len` payload bytes): the CRC
/// of the header's (P, N) bytes followed by the payload. The writer and the reader both use it.
std::uint32_t block_crc(const std::uint8_t* block, std::uint32_t payload_len);

/// Fill the 16-byte header at `block` (magic, P, N, CRC) for the payload that follows it; returns
/// the bytes of the whole block (header + payload).
std::size_t seal_block(std::uint8_t* block, const char (&magic)[4], std::uint32_t payload_len, std::uint32_t count);

/// The complete FileHeader bytes (fixed part, body, CRC).
std::vector<std::uint8_t> encode_header(const Header& header);

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME, vDSO: no system call).
std::uint64_t now_ns();

} // namespace gpumemprof::trace
