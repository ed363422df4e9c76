// SPDX-License-Identifier: MIT
// Codec of the trace schema documented in format.hpp.
#include "trace/format.hpp"

#include "trace/crc32.hpp"

#include <cstring>
#include <ctime>

namespace gpumemprof::trace {
namespace {

constexpr std::uint8_t kHasDevice = 0x10;
constexpr std::uint8_t kHasStream = 0x20;
constexpr std::uint8_t kHasStack = 0x40;
constexpr std::uint8_t kHasExtension = 0x80;
constexpr std::uint8_t kExtContext = 0x01;
constexpr std::uint8_t kExtPoolId = 0x02;
constexpr std::uint8_t kExtKnown = kExtContext | kExtPoolId;

inline std::uint8_t* put_zvarint(std::uint8_t* out, std::uint64_t delta) {
    // delta is a two's-complement difference; zigzag keeps small negative steps short.
    const auto s = static_cast<std::int64_t>(delta);
    return put_varint(out, (static_cast<std::uint64_t>(s) << 1) ^ static_cast<std::uint64_t>(s >> 63));
}

bool get_varint_long(const std::uint8_t** p, const std::uint8_t* end, std::uint64_t* v) {
    const std::uint8_t* q = *p;
    std::uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (q == end)
            return false;
        const std::uint8_t b = *q++;
        if (shift == 63 && b > 1)
            return false; // would overflow 64 bits
        r |= static_cast<std::uint64_t>(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *v = r;
            return true;
        }
    }
    return false;
}

/// One varint; most fields fit one byte, which is decoded inline.
inline bool get_varint(const std::uint8_t** p, const std::uint8_t* end, std::uint64_t* v) {
    const std::uint8_t* q = *p;
    if (q != end && *q < 0x80) [[likely]] {
        *v = *q;
        *p = q + 1;
        return true;
    }
    return get_varint_long(p, end, v);
}

inline bool get_zvarint(const std::uint8_t** p, const std::uint8_t* end, std::uint64_t* delta) {
    std::uint64_t z;
    if (!get_varint(p, end, &z))
        return false;
    *delta = (z >> 1) ^ (~(z & 1) + 1);
    return true;
}

void store_u32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
        p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
    std::uint8_t tmp[4];
    store_u32(tmp, v);
    out.insert(out.end(), tmp, tmp + 4);
}

void append_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
    std::uint8_t tmp[10];
    std::uint8_t* e = put_varint(tmp, v);
    out.insert(out.end(), tmp, e);
}

void put_str(std::vector<std::uint8_t>& out, std::string_view s) {
    append_varint(out, s.size());
    const std::size_t at = out.size();
    out.resize(at + s.size());
    if (!s.empty())
        std::memcpy(out.data() + at, s.data(), s.size());
}

} // namespace

std::uint8_t* put_varint(std::uint8_t* out, std::uint64_t v) {
    while (v >= 0x80) {
        *out++ = static_cast<std::uint8_t>(v | 0x80);
        v >>= 7;
    }
    *out++ = static_cast<std::uint8_t>(v);
    return out;
}

std::size_t encode_event(const Event& ev, CodecState& st, std::uint8_t* out) {
    std::uint8_t tag = static_cast<std::uint8_t>(ev.type) & 0x0F;
    std::uint8_t ext = 0;
    if (st.version >= 3) {
        if (ev.context != st.context)
            ext |= kExtContext;
        if (ev.pool_id != st.pool_id)
            ext |= kExtPoolId;
    }
    std::uint8_t* p = out + 1;
    if (ext != 0) {
        tag |= kHasExtension;
        *p++ = ext;
    }
    p = put_zvarint(p, ev.time_ns - st.time_ns);
    st.time_ns = ev.time_ns;
    if (ev.device != st.device) {
        tag |= kHasDevice;
        p = put_varint(p, ev.device);
        st.device = ev.device;
    }
    if (ev.stream != st.stream) {
        tag |= kHasStream;
        p = put_varint(p, ev.stream);
        st.stream = ev.stream;
    }
    p = put_zvarint(p, ev.ptr - st.ptr);
    st.ptr = ev.ptr;
    p = put_varint(p, ev.size);
    p = put_zvarint(p, ev.block_size - ev.size);
    if (ev.stack_id != st.stack_id) {
        tag |= kHasStack;
        p = put_varint(p, ev.stack_id);
        st.stack_id = ev.stack_id;
    }
    if (ext & kExtContext) {
        p = put_varint(p, ev.context);
        st.context = ev.context;
    }
    if (ext & kExtPoolId) {
        p = put_varint(p, ev.pool_id.first);
        p = put_varint(p, ev.pool_id.second);
        st.pool_id = ev.pool_id;
    }
    if (ev.type == EventType::oom) {
        p = put_varint(p, ev.device_free);
        if (st.version >= 2)
            p = put_varint(p, ev.largest_free);
    }
    out[0] = tag;
    return static_cast<std::size_t>(p - out);
}

bool decode_event(const std::uint8_t** pp, const std::uint8_t* end, CodecState& st, Event* ev, const char** why) {
    const std::uint8_t* p = *pp;
    if (p == end) {
        *why = "event expected but the block payload ended";
        return false;
    }
    const std::uint8_t tag = *p++;
    const std::uint8_t type = tag & 0x0F;
    if (type == 0 || type > kMaxEventType) {
        *why = "unknown event type";
        return false;
    }
    std::uint8_t ext = 0;
    if (tag & kHasExtension) {
        if (st.version < 3) {
            *why = "event tag has the reserved bit set";
            return false;
        }
        if (p == end) {
            *why = "event extension byte runs past the end of the block payload";
            return false;
        }
        ext = *p++;
        if (ext == 0 || (ext & ~kExtKnown) != 0) {
            *why = ext == 0 ? "event extension byte is empty" : "event extension byte has a reserved bit set";
            return false;
        }
    }
    std::uint64_t v;
    Event e;
    e.type = static_cast<EventType>(type);
    *why = "event field runs past the end of the block payload or is not a valid varint";
    if (!get_zvarint(&p, end, &v))
        return false;
    e.time_ns = st.time_ns + v;
    if (tag & kHasDevice) {
        if (!get_varint(&p, end, &v))
            return false;
        if (v > 0xFFFFFFFFu) {
            *why = "device ordinal does not fit in 32 bits";
            return false;
        }
        st.device = static_cast<std::uint32_t>(v);
    }
    e.device = st.device;
    if (tag & kHasStream) {
        if (!get_varint(&p, end, &v))
            return false;
        st.stream = v;
    }
    e.stream = st.stream;
    if (!get_zvarint(&p, end, &v))
        return false;
    e.ptr = st.ptr + v;
    if (!get_varint(&p, end, &e.size))
        return false;
    if (!get_zvarint(&p, end, &v))
        return false;
    e.block_size = e.size + v;
    if (tag & kHasStack) {
        if (!get_varint(&p, end, &v))
            return false;
        st.stack_id = v;
    }
    e.stack_id = st.stack_id;
    if (ext & kExtContext) {
        if (!get_varint(&p, end, &v))
            return false;
        st.context = v;
    }
    e.context = st.context;
    if (ext & kExtPoolId) {
        PoolId id;
        if (!get_varint(&p, end, &id.first) || !get_varint(&p, end, &id.second))
            return false;
        st.pool_id = id;
    }
    e.pool_id = st.pool_id;
    if (e.type == EventType::oom && !get_varint(&p, end, &e.device_free))
        return false;
    if (e.type == EventType::oom && st.version >= 2 && !get_varint(&p, end, &e.largest_free))
        return false;
    st.time_ns = e.time_ns;
    st.ptr = e.ptr;
    *ev = e;
    *pp = p;
    return true;
}

bool read_varint(const std::uint8_t** p, const std::uint8_t* end, std::uint64_t* v) {
    return get_varint(p, end, v);
}

std::uint32_t block_crc(const std::uint8_t* block, std::uint32_t payload_len) {
    // The CRC field sits between (P, N) and the payload, so it is computed in two pieces.
    const std::uint32_t c = crc32(0, block + 4, 8);
    return crc32(c, block + kBlockHeaderBytes, payload_len);
}

std::size_t seal_block(std::uint8_t* block, const char (&magic)[4], std::uint32_t payload_len, std::uint32_t count) {
    std::memcpy(block, magic, 4);
    store_u32(block + 4, payload_len);
    store_u32(block + 8, count);
    store_u32(block + 12, block_crc(block, payload_len));
    return kBlockHeaderBytes + payload_len;
}

std::vector<std::uint8_t> encode_header(const Header& h) {
    std::vector<std::uint8_t> body;
    append_varint(body, h.pid);
    put_str(body, h.host);
    put_str(body, h.exe);
    put_str(body, h.alloc_conf);
    append_varint(body, h.start_time_ns);
    append_varint(body, h.devices.size());
    for (const auto& d : h.devices) {
        append_varint(body, d.ordinal);
        append_varint(body, d.total_bytes);
    }
    append_varint(body, h.metadata.size());
    for (const auto& [k, v] : h.metadata) {
        put_str(body, k);
        put_str(body, v);
    }
    std::vector<std::uint8_t> out(kFileMagic, kFileMagic + 8);
    put_u32(out, kFormatVersion);
    put_u32(out, static_cast<std::uint32_t>(body.size()));
    out.insert(out.end(), body.begin(), body.end());
    put_u32(out, crc32(0, out.data(), out.size()));
    return out;
}

std::uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

} // namespace gpumemprof::trace

namespace gpumemprof::trace {

void append_stack_head(std::vector<std::uint8_t>& out, std::uint64_t id, std::uint64_t frames) {
    append_varint(out, id);
    append_varint(out, frames);
}

void append_stack_frame(std::vector<std::uint8_t>& out, std::string_view function, std::string_view file,
                        std::uint32_t line, std::string_view module, std::uint64_t offset, std::string_view kind) {
    put_str(out, function);
    put_str(out, file);
    append_varint(out, line);
    put_str(out, module);
    append_varint(out, offset);
    put_str(out, kind);
}

std::vector<std::uint8_t> encode_stacks(const std::vector<Stack>& stacks) {
    std::vector<std::uint8_t> out;
    for (const Stack& s : stacks) {
        append_stack_head(out, s.id, s.frames.size());
        for (const StackFrame& f : s.frames)
            append_stack_frame(out, f.function, f.file, f.line, f.module, f.offset, f.kind);
    }
    return out;
}

bool decode_stacks(const std::uint8_t* p, const std::uint8_t* end, std::uint32_t count, std::vector<Stack>* out,
                   const char** why) {
    auto str = [&](std::string* s) {
        std::uint64_t n = 0;
        if (!read_varint(&p, end, &n) || n > static_cast<std::uint64_t>(end - p))
            return false;
        s->assign(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
        p += n;
        return true;
    };
    for (std::uint32_t i = 0; i < count; ++i) {
        Stack s;
        std::uint64_t frames = 0;
        // Each frame takes at least 6 bytes: that bounds the count before reserving.
        if (!read_varint(&p, end, &s.id) || !read_varint(&p, end, &frames) ||
            frames > static_cast<std::uint64_t>(end - p) / 6) {
            *why = "malformed stack in a stack block";
            return false;
        }
        s.frames.resize(static_cast<std::size_t>(frames));
        for (StackFrame& f : s.frames) {
            std::uint64_t line = 0;
            if (!str(&f.function) || !str(&f.file) || !read_varint(&p, end, &line) || line > 0xFFFFFFFFu ||
                !str(&f.module) || !read_varint(&p, end, &f.offset) || !str(&f.kind)) {
                *why = "malformed frame in a stack block";
                return false;
            }
            f.line = static_cast<std::uint32_t>(line);
        }
        out->push_back(std::move(s));
    }
    if (p != end) {
        *why = "stack block payload has bytes after its last stack";
        return false;
    }
    return true;
}

} // namespace gpumemprof::trace
