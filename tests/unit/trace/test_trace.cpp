// SPDX-License-Identifier: MIT
// Trace format: exact bytes of the schema, round trip, truncation, corruption, versions, threads.
#include "trace/crc32.hpp"
#include "trace/format.hpp"
#include "trace/reader.hpp"
#include "trace/writer.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <sys/file.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gpumemprof::trace;

namespace {

std::string temp_path(const char* tag) {
    return "/tmp/gpumemprof_test_trace_" + std::to_string(::getpid()) + "_" + tag + ".gmt";
}

std::vector<std::uint8_t> slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t u32_at(const std::vector<std::uint8_t>& b, std::size_t off) {
    return b[off] | b[off + 1] << 8 | b[off + 2] << 16 | static_cast<std::uint32_t>(b[off + 3]) << 24;
}

Header sample_header() {
    Header h;
    h.pid = 4242;
    h.host = "node-17";
    h.exe = "/usr/bin/python3";
    h.alloc_conf = "max_split_size_mb:128,roundup_power2_divisions:4";
    h.start_time_ns = 1700000000123456789ull;
    h.devices = {{0, 85899345920ull}, {3, 42949672960ull}};
    h.metadata = {{"source", "unit test"}, {"", "empty key"}};
    return h;
}

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// Every event type, every field non-zero somewhere, deltas going up and down, extremes.
std::vector<Event> sample_events() {
    std::vector<Event> v;
    v.push_back({EventType::segment_alloc, 0, 7, 0x7f0000000000, 20971520, 20971520, 11, 1000, 0});
    v.push_back({EventType::alloc, 0, 7, 0x7f0000000000, 3000000, 3000320, 12, 1001, 0});
    v.push_back({EventType::alloc, 3, 0, 0x10, 1, 512, 0, 900, 0}); // time goes backwards
    v.push_back({EventType::free_requested, 0, 7, 0x7f0000000000, 3000000, 3000320, 13, 2000, 0});
    v.push_back({EventType::free_completed, 0, 7, 0x7f0000000000, 3000000, 3000320, 13, 2001, 0});
    v.push_back({EventType::segment_free, 0, 7, 0x7f0000000000, 20971520, 20971520, 0, 2002, 0});
    v.push_back({EventType::vmm_map, 1, 0, 0x200000000, 2097152, 2097152, 0, 3000, 0});
    v.push_back({EventType::vmm_unmap, 1, 0, 0x200000000, 2097152, 2097152, 0, 3001, 0});
    v.push_back({EventType::oom, 2, 99, 0, 85899345920ull, 85899345920ull, 14, 4000, 123456, 10485760});
    v.push_back({EventType::live_block, 0, 5, kMax, kMax, 0, kMax, kMax, 0}); // block_size < size
    v.push_back({EventType::alloc, 0xFFFFFFFFu, kMax, 0, 0, kMax, 1, 1, 0});  // time back to 1
    v.push_back({EventType::oom, 0, 0, 1, 2, 3, 4, 5, kMax});
    v.push_back({EventType::device_info, 6, 0, 0, 85899345920ull, 85899345920ull, 0, 6, 0});
    return v;
}

// Version 3: events in a second context of device 0 and in private pools (a CUDA graph's pool
// (1, 0), a MemPool's (0, 1)), switching back and forth, extremes.
std::vector<Event> sample_events_v3() {
    std::vector<Event> v = sample_events();
    v.push_back({EventType::alloc, 0, 7, 0x7f0000200000, 4096, 4096, 12, 7000, 0, 0, 1, {0, 0}});
    v.push_back({EventType::alloc, 0, 7, 0x7f0000400000, 4096, 4096, 12, 7001, 0, 0, 1, {1, 0}});
    v.push_back({EventType::free_requested, 0, 7, 0x7f0000400000, 4096, 4096, 12, 7002, 0, 0, 1, {1, 0}});
    v.push_back({EventType::alloc, 0, 7, 0x7f0000600000, 4096, 4096, 12, 7003, 0, 0, 0, {0, 1}});
    v.push_back({EventType::oom, 0, 7, 0, 4096, 4096, 12, 7004, 77, 88, kMax, {kMax, kMax}});
    v.push_back({EventType::segment_free, 0, 7, 0x7f0000000000, 20971520, 20971520, 0, 7005, 0, 0, 0, {0, 0}});
    return v;
}

// A file of format `version` (1 or 2) made by hand: the header with that version, one event block
// encoded as that version encodes.
std::vector<std::uint8_t> old_version_file(std::uint32_t version, const std::vector<Event>& evs) {
    std::vector<std::uint8_t> b = encode_header(sample_header());
    b[8] = static_cast<std::uint8_t>(version);
    const std::uint32_t body = u32_at(b, 12);
    const std::uint32_t crc = crc32(0, b.data(), 16 + body);
    for (int i = 0; i < 4; ++i)
        b[16 + body + i] = static_cast<std::uint8_t>(crc >> (8 * i));
    std::vector<std::uint8_t> block(kBlockHeaderBytes + evs.size() * kMaxEventBytes);
    CodecState st;
    st.version = version;
    std::size_t used = 0;
    for (const Event& e : evs)
        used += encode_event(e, st, block.data() + kBlockHeaderBytes + used);
    const std::size_t n =
        seal_block(block.data(), kBlockMagic, static_cast<std::uint32_t>(used), static_cast<std::uint32_t>(evs.size()));
    b.insert(b.end(), block.begin(), block.begin() + static_cast<std::ptrdiff_t>(n));
    return b;
}

std::vector<std::uint8_t> write_file(const std::string& path, const std::vector<Event>& evs, std::uint32_t per_block,
                                     bool close = true) {
    Writer w;
    REQUIRE(w.open(path, sample_header(), WriterOptions{per_block, false}));
    for (const auto& e : evs)
        w.record(e);
    if (close)
        w.close();
    else
        w.flush();
    auto bytes = slurp(path);
    if (!close)
        w.close();
    return bytes;
}

std::vector<Event> read_memory(const std::vector<std::uint8_t>& b, std::size_t size, Reader& r) {
    std::vector<Event> out;
    if (r.open_memory(b.data(), size)) {
        Event e;
        while (r.next(e))
            out.push_back(e);
    }
    return out;
}

} // namespace

TEST_CASE("crc32 matches the IEEE/zlib check value") {
    // The standard check value of CRC-32/ISO-HDLC for "123456789" is 0xCBF43926.
    REQUIRE(crc32(0, "123456789", 9) == 0xCBF43926u);
    // Chaining: crc("1234") then "56789" equals the one-shot value.
    REQUIRE(crc32(crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
    REQUIRE(crc32(0, "", 0) == 0u);
}

TEST_CASE("one event encodes to the bytes the schema prescribes") {
    // alloc, device 0, stream 0, ptr 0x1000, size 1000, block_size 1024, stack 0, time 5, fresh state:
    //   tag          = type 1, no device/stream/stack bits             -> 0x01
    //   time delta 5 -> zigzag 10                                      -> 0x0A
    //   ptr delta 4096 -> zigzag 8192 = 64 * 128 -> LEB128 (0|0x80),64  -> 0x80 0x40
    //   size 1000 = 7 * 128 + 104 -> (104|0x80), 7                     -> 0xE8 0x07
    //   block_size - size = 24 -> zigzag 48                            -> 0x30
    Event e{EventType::alloc, 0, 0, 0x1000, 1000, 1024, 0, 5, 0};
    CodecState st;
    std::uint8_t buf[kMaxEventBytes];
    const std::size_t n = encode_event(e, st, buf);
    const std::vector<std::uint8_t> got(buf, buf + n);
    REQUIRE(got == std::vector<std::uint8_t>{0x01, 0x0A, 0x80, 0x40, 0xE8, 0x07, 0x30});

    // A following free_requested on device 2 (bit 4), stack 9 (bit 6), same ptr, 3 ns later:
    //   tag 0x02|0x10|0x40 = 0x52, time 3 -> 6, device 2, ptr delta 0 -> 0, size 1000, delta 24 -> 48, stack 9
    Event f{EventType::free_requested, 2, 0, 0x1000, 1000, 1024, 9, 8, 0};
    const std::size_t m = encode_event(f, st, buf);
    REQUIRE(std::vector<std::uint8_t>(buf, buf + m) ==
            std::vector<std::uint8_t>{0x52, 0x06, 0x02, 0x00, 0xE8, 0x07, 0x30, 0x09});

    // Version 3: a free_completed in context 5 and a CUDA graph's pool (3, 300), 1 ns later:
    //   tag 0x03|0x80 (extension), extension 0x01 (context) | 0x02 (pool id) = 0x03,
    //   time 1 -> 2, ptr delta 0, size 1000, delta 24 -> 48, context 5, pool 3, 300 = (44|0x80), 2
    Event g{EventType::free_completed, 2, 0, 0x1000, 1000, 1024, 9, 9, 0, 0, 5, {3, 300}};
    const std::size_t k = encode_event(g, st, buf);
    REQUIRE(std::vector<std::uint8_t>(buf, buf + k) ==
            std::vector<std::uint8_t>{0x83, 0x03, 0x02, 0x00, 0xE8, 0x07, 0x30, 0x05, 0x03, 0xAC, 0x02});
    // The next event in the same context and pool carries neither (no extension byte); back to
    // the default pool in the same context: extension 0x02 only, pool (0, 0).
    g.time_ns = 10;
    REQUIRE(encode_event(g, st, buf) == 6); // tag, time, ptr, size (2 bytes), block_size delta
    REQUIRE(buf[0] == 0x03);
    g.time_ns = 11;
    g.pool_id = kDefaultPool;
    const std::size_t j = encode_event(g, st, buf);
    REQUIRE(std::vector<std::uint8_t>(buf, buf + j) ==
            std::vector<std::uint8_t>{0x83, 0x02, 0x02, 0x00, 0xE8, 0x07, 0x30, 0x00, 0x00});
}

TEST_CASE("version 3: contexts and pool ids round trip; bad extension bytes are corrupt") {
    const auto path = temp_path("v3");
    const auto evs = sample_events_v3();
    for (std::uint32_t per_block : {1u, 2u, 4096u}) {
        const auto b = write_file(path, evs, per_block);
        Reader r;
        const auto got = read_memory(b, b.size(), r);
        INFO(r.error());
        REQUIRE_FALSE(r.failed());
        REQUIRE(r.header().version == 3u);
        REQUIRE(got == evs);
    }
    // One event by hand: alloc with the extension bit but an extension byte of 0x04 (reserved).
    const auto one = [](std::vector<std::uint8_t> payload) {
        std::vector<std::uint8_t> b = encode_header(sample_header());
        std::vector<std::uint8_t> block(kBlockHeaderBytes);
        block.insert(block.end(), payload.begin(), payload.end());
        seal_block(block.data(), kBlockMagic, static_cast<std::uint32_t>(payload.size()), 1);
        b.insert(b.end(), block.begin(), block.end());
        return b;
    };
    for (const auto& [payload, why] : std::vector<std::pair<std::vector<std::uint8_t>, std::string>>{
             {{0x81, 0x04, 0x00, 0x00, 0x00, 0x00}, "event extension byte has a reserved bit set"},
             {{0x81, 0x00, 0x00, 0x00, 0x00, 0x00}, "event extension byte is empty"},
             {{0x81, 0x02, 0x00, 0x00, 0x00, 0x00, 0x05}, "event field runs past the end"}}) {
        const auto b = one(payload);
        Reader r;
        REQUIRE(read_memory(b, b.size(), r).empty());
        REQUIRE(r.error_kind() == ReadError::corrupt);
        INFO(r.error());
        REQUIRE(r.error().find(why) != std::string::npos);
    }
    // Well formed: an alloc of all-zero fields in pool (5, 6).
    const auto good = one({0x81, 0x02, 0x00, 0x00, 0x00, 0x00, 0x05, 0x06});
    Reader r;
    const auto got = read_memory(good, good.size(), r);
    INFO(r.error());
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].pool_id == PoolId{5, 6});
    REQUIRE(got[0].context == 0);
    std::remove(path.c_str());
}

TEST_CASE("version 2 files are still read (no contexts or pool ids; bit 7 of a tag is corrupt there)") {
    const auto evs = sample_events_v3();
    const auto b = old_version_file(2, evs);
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    INFO(r.error());
    REQUIRE_FALSE(r.failed());
    REQUIRE(r.header().version == 2u);
    REQUIRE(got.size() == evs.size());
    for (std::size_t i = 0; i < evs.size(); ++i) {
        Event want = evs[i];
        want.context = 0; // not in version 2
        want.pool_id = kDefaultPool;
        REQUIRE(got[i] == want);
    }
    // A tag with bit 7 in a version 2 file: the bit was reserved then.
    std::vector<std::uint8_t> bad = old_version_file(2, {Event{EventType::alloc, 0, 0, 0x1000, 1000, 1024, 0, 5, 0}});
    const std::size_t tag_at = bad.size() - 7; // the event is 7 bytes (see the exact-bytes test)
    bad[tag_at] |= 0x80;
    {
        const std::size_t block_at = tag_at - kBlockHeaderBytes;
        const std::uint32_t c = block_crc(bad.data() + block_at, 7);
        for (int i = 0; i < 4; ++i)
            bad[block_at + 12 + i] = static_cast<std::uint8_t>(c >> (8 * i));
    }
    Reader rb;
    REQUIRE(read_memory(bad, bad.size(), rb).empty());
    REQUIRE(rb.error_kind() == ReadError::corrupt);
    REQUIRE(rb.error().find("reserved bit") != std::string::npos);
}

TEST_CASE("a step mark encodes as type 11 with its number in size, and reads back") {
    // step 41, 7 ns in, fresh state: tag 0x0B, time 7 -> zigzag 14, ptr 0, size 41 = 0x29, delta 0
    Event e{EventType::step, 0, 0, 0, 41, 41, 0, 7, 0};
    CodecState st;
    std::uint8_t buf[kMaxEventBytes];
    const std::size_t n = encode_event(e, st, buf);
    REQUIRE(std::vector<std::uint8_t>(buf, buf + n) == std::vector<std::uint8_t>{0x0B, 0x0E, 0x00, 0x29, 0x00});
    CodecState rd;
    const std::uint8_t* p = buf;
    Event back;
    const char* why = nullptr;
    REQUIRE(decode_event(&p, buf + n, rd, &back, &why));
    REQUIRE(back == e);
}

TEST_CASE("file header layout: magic, version 3, body length, CRC") {
    const auto path = temp_path("hdr");
    const auto b = write_file(path, {}, 4);
    REQUIRE(b.size() >= 20);
    REQUIRE(std::memcmp(b.data(), "GPUMEMTR", 8) == 0);
    REQUIRE(u32_at(b, 8) == 3u);
    const std::uint32_t body = u32_at(b, 12);
    REQUIRE(u32_at(b, 16 + body) == crc32(0, b.data(), 16 + body));
    // No events: after the header comes only the end record "GMTE" with payload {0 events, 0 blocks}.
    const std::size_t end = 16 + body + 4;
    REQUIRE(b.size() == end + 16 + 2);
    REQUIRE(std::memcmp(b.data() + end, "GMTE", 4) == 0);
    REQUIRE(u32_at(b, end + 4) == 2u);
    REQUIRE(u32_at(b, end + 8) == 0u);
    std::remove(path.c_str());
}

TEST_CASE("version 2: stack blocks round trip after the events, outside the end record's count") {
    const auto path = temp_path("stk");
    const auto evs = sample_events();
    std::vector<Stack> stacks = {
        {9, {{"step()", "/src/train.cpp", 57, "app", 0x1234, ""}, {"main", "/src/train.cpp", 88, "app", 0x99, ""}}},
        {12, {{"forward", "model.py", 125, "", 0, "python"}}},
        {13, {}},
    };
    {
        Writer w;
        REQUIRE(w.open(path, sample_header(), WriterOptions{4, false}));
        for (const auto& e : evs)
            w.record(e);
        w.write_stacks(stacks);
        w.close();
    }
    const auto b = slurp(path);
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    INFO(r.error());
    REQUIRE_FALSE(r.failed());
    REQUIRE(r.complete());
    REQUIRE(got == evs);
    REQUIRE(r.blocks_read() == 4); // 13 events in blocks of 4; the stack block is not counted
    REQUIRE(r.stacks() == stacks);
    // A damaged stack block is reported like any other block (CRC), at its offset.
    std::vector<std::uint8_t> bad = b;
    const std::size_t at = std::string(bad.begin(), bad.end()).find("GMTS");
    REQUIRE(at != std::string::npos);
    bad[at + 20] ^= 0xFF;
    Reader rb;
    read_memory(bad, bad.size(), rb);
    REQUIRE(rb.error_kind() == ReadError::corrupt);
    REQUIRE(rb.error_offset() == at);
    std::remove(path.c_str());
}

TEST_CASE("version 1 files are still read (no largest_free in OOM events, no stack blocks)") {
    const auto evs = sample_events_v3();
    const auto b = old_version_file(1, evs);
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    INFO(r.error());
    REQUIRE_FALSE(r.failed());
    REQUIRE(r.header().version == 1u);
    REQUIRE(got.size() == evs.size());
    for (std::size_t i = 0; i < evs.size(); ++i) {
        Event want = evs[i];
        want.largest_free = 0; // not in version 1
        want.context = 0;
        want.pool_id = kDefaultPool;
        REQUIRE(got[i] == want);
    }
    REQUIRE(r.stacks().empty());
}

TEST_CASE("round trip keeps every event type and field") {
    const auto path = temp_path("rt");
    const auto evs = sample_events();
    for (std::uint32_t per_block : {1u, 3u, 4096u}) {
        const auto b = write_file(path, evs, per_block);
        Reader r;
        const auto got = read_memory(b, b.size(), r);
        INFO(r.error());
        REQUIRE_FALSE(r.failed());
        REQUIRE(r.complete());
        REQUIRE(r.header() == sample_header());
        REQUIRE(got == evs);
        // 13 events in blocks of per_block: ceil(13 / per_block) blocks.
        REQUIRE(r.blocks_read() == (13 + per_block - 1) / per_block);
    }
    // The same through open_file.
    Reader rf;
    REQUIRE(rf.open_file(path));
    Event e;
    std::size_t n = 0;
    while (rf.next(e))
        REQUIRE(e == evs[n++]);
    REQUIRE(n == evs.size());
    REQUIRE(rf.complete());
    std::remove(path.c_str());
}

TEST_CASE("open_file reads a block at a time and says what open_memory says, at every cut and flip") {
    // A regular file is streamed (pread per block), a buffer in memory is read in place: the same
    // events, the same error, the same offset, for the file cut at every byte and with a byte of
    // each block flipped; rewind() reads it again from the first block.
    const auto path = temp_path("stream");
    const auto cut = temp_path("stream_cut");
    const auto evs = sample_events_v3();
    Stack stack{9, {{"f", "a.cpp", 1, "m", 2, ""}}};
    {
        Writer w;
        REQUIRE(w.open(path, sample_header(), WriterOptions{3, false}));
        for (const auto& e : evs)
            w.record(e);
        w.write_stacks({stack});
        w.close();
    }
    const auto whole = slurp(path);
    const auto same = [&](const std::vector<std::uint8_t>& bytes) {
        {
            std::FILE* f = std::fopen(cut.c_str(), "wb");
            REQUIRE(f != nullptr);
            if (!bytes.empty())
                REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
            std::fclose(f);
        }
        Reader m;
        const auto from_memory = read_memory(bytes, bytes.size(), m);
        Reader f;
        std::vector<Event> from_file;
        if (f.open_file(cut)) {
            Event e;
            while (f.next(e))
                from_file.push_back(e);
        }
        REQUIRE(from_file == from_memory);
        REQUIRE(f.error_kind() == m.error_kind());
        REQUIRE(f.error() == m.error());
        REQUIRE(f.complete() == m.complete());
        REQUIRE(f.stacks() == m.stacks());
    };
    same(whole);
    for (std::size_t n = 0; n < whole.size(); n += 7)
        same(std::vector<std::uint8_t>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n)));
    for (std::size_t at = 16; at < whole.size(); at += 61) {
        auto bad = whole;
        bad[at] ^= 0x5A;
        same(bad);
    }
    Reader r;
    REQUIRE(r.open_file(path));
    Event e;
    std::size_t n = 0;
    while (r.next(e))
        ++n;
    REQUIRE(n == evs.size());
    REQUIRE(r.stacks() == std::vector<Stack>{stack});
    r.rewind();
    std::vector<Event> again;
    while (r.next(e))
        again.push_back(e);
    REQUIRE(again == evs);
    REQUIRE(r.complete());
    std::remove(path.c_str());
    std::remove(cut.c_str());
}

TEST_CASE("a time_ns of 0 is stamped with the wall clock") {
    const auto path = temp_path("stamp");
    const std::uint64_t before = now_ns();
    const auto b = write_file(path, {Event{EventType::alloc, 0, 0, 4096, 512, 512, 0, 0, 0}}, 8);
    const std::uint64_t after = now_ns();
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].time_ns >= before);
    REQUIRE(got[0].time_ns <= after);
    std::remove(path.c_str());
}

TEST_CASE("a file without end record (program died) still yields its flushed blocks") {
    const auto path = temp_path("noend");
    const auto evs = sample_events();
    const auto b = write_file(path, evs, 5, /*close=*/false); // snapshot of the file before close()
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    REQUIRE_FALSE(r.failed());
    REQUIRE_FALSE(r.complete());
    REQUIRE(got == evs);
    std::remove(path.c_str());
}

TEST_CASE("truncation at every byte offset gives the valid prefix, then a clean error") {
    const auto path = temp_path("trunc");
    const auto evs = sample_events();
    const auto b = write_file(path, evs, 4); // 13 events -> blocks of 4, 4, 4, 1, then the end record
    // Walk the block headers by the schema to know where each block ends.
    const std::size_t header_end = 16 + u32_at(b, 12) + 4;
    std::vector<std::size_t> block_end; // byte offset just past block i
    for (std::size_t pos = header_end; pos < b.size(); pos += 16 + u32_at(b, pos + 4))
        block_end.push_back(pos + 16 + u32_at(b, pos + 4));
    REQUIRE(block_end.size() == 5);
    REQUIRE(block_end.back() == b.size());

    for (std::size_t k = 0; k < b.size(); ++k) {
        Reader r;
        const auto got = read_memory(b, k, r);
        // Complete event blocks before k: each holds 4 events.
        std::size_t complete_blocks = 0;
        while (complete_blocks < 4 && block_end[complete_blocks] <= k)
            ++complete_blocks;
        INFO("cut at " << k << ": " << r.error());
        REQUIRE(got.size() == std::min<std::size_t>(4 * complete_blocks, 13));
        REQUIRE(std::equal(got.begin(), got.end(), evs.begin()));
        const bool at_boundary = k == header_end || (complete_blocks > 0 && block_end[complete_blocks - 1] == k);
        if (at_boundary) {
            REQUIRE_FALSE(r.failed()); // what a crash leaves: valid, just without end record
            REQUIRE_FALSE(r.complete());
        } else {
            REQUIRE(r.error_kind() == ReadError::truncated);
            REQUIRE(r.error_offset() == k);
            REQUIRE(r.error().rfind("byte offset " + std::to_string(k) + ": file ends inside", 0) == 0);
        }
    }
    std::remove(path.c_str());
}

TEST_CASE("a flipped payload byte is reported as a CRC mismatch at its block's offset") {
    const auto path = temp_path("crc");
    const auto evs = sample_events();
    auto b = write_file(path, evs, 4);
    const std::size_t block1 = 16 + u32_at(b, 12) + 4;
    const std::size_t block2 = block1 + 16 + u32_at(b, block1 + 4);
    b[block2 + 16 + 2] ^= 0x40; // inside the second block's payload
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    REQUIRE(r.error_kind() == ReadError::corrupt);
    REQUIRE(r.error_offset() == block2);
    REQUIRE(r.error().find("block CRC mismatch") != std::string::npos);
    REQUIRE(got.size() == 4); // only the first block
    std::remove(path.c_str());
}

TEST_CASE("a corrupt header is reported at the header CRC") {
    const auto path = temp_path("hcrc");
    auto b = write_file(path, sample_events(), 4);
    const std::uint32_t body = u32_at(b, 12);
    b[16 + 3] ^= 1;
    Reader r;
    REQUIRE_FALSE(r.open_memory(b.data(), b.size()));
    REQUIRE(r.error_kind() == ReadError::corrupt);
    REQUIRE(r.error_offset() == 16 + body);
    REQUIRE(r.error().find("header CRC mismatch") != std::string::npos);
    std::remove(path.c_str());
}

TEST_CASE("an unknown format version is rejected at offset 8") {
    const auto path = temp_path("ver");
    auto b = write_file(path, sample_events(), 4);
    b[8] = 4; // version 4 (the CRC is not even looked at: the version decides how to read the rest)
    Reader r;
    REQUIRE_FALSE(r.open_memory(b.data(), b.size()));
    REQUIRE(r.error_kind() == ReadError::unsupported_version);
    REQUIRE(r.error() == "byte offset 8: unsupported trace format version 4 (this gpumemprof reads versions 1 to 3)");
    b[8] = 0;
    REQUIRE_FALSE(r.open_memory(b.data(), b.size()));
    REQUIRE(r.error_kind() == ReadError::unsupported_version);
    std::remove(path.c_str());
}

TEST_CASE("not a trace, missing file") {
    const std::string text = "hello world, this is not a trace";
    Reader r;
    REQUIRE_FALSE(r.open_memory(text.data(), text.size()));
    REQUIRE(r.error_kind() == ReadError::bad_magic);
    REQUIRE(r.error_offset() == 0);
    Reader m;
    REQUIRE_FALSE(m.open_file("/nonexistent/dir/x.gmt"));
    REQUIRE(m.error_kind() == ReadError::io);
    REQUIRE(m.error().find("/nonexistent/dir/x.gmt") != std::string::npos);
}

TEST_CASE("data after the end record is corrupt") {
    const auto path = temp_path("tail");
    auto b = write_file(path, sample_events(), 4);
    const std::size_t size = b.size();
    b.push_back(0);
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    REQUIRE(got.size() == 13);
    REQUIRE(r.error_kind() == ReadError::corrupt);
    REQUIRE(r.error_offset() == size);
    std::remove(path.c_str());
}

TEST_CASE("an OOM event flushes its block at once (flush_on_oom)") {
    const auto path = temp_path("oom");
    Writer w;
    REQUIRE(w.open(path, Header{}, WriterOptions{4096, true}));
    w.record(Event{EventType::alloc, 0, 0, 4096, 512, 512, 0, 1, 0});
    w.record(Event{EventType::oom, 0, 0, 0, 1ull << 40, 1ull << 40, 0, 2, 1000});
    const auto b = slurp(path); // before close: the block must already be on disk
    Reader r;
    const auto got = read_memory(b, b.size(), r);
    REQUIRE_FALSE(r.failed());
    REQUIRE(got.size() == 2);
    REQUIRE(got[1].device_free == 1000);
    w.close();
    std::remove(path.c_str());
}

TEST_CASE("record() from many threads loses nothing and keeps each thread's order") {
    const auto path = temp_path("mt");
    Writer w;
    REQUIRE(w.open(path, Header{}, WriterOptions{100, false}));
    constexpr int kThreads = 4;
    constexpr std::uint64_t kPer = 20000;
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
        ts.emplace_back([&w, t] {
            for (std::uint64_t i = 0; i < kPer; ++i)
                w.record(Event{EventType::alloc, 0, static_cast<std::uint64_t>(t), i, 512, 512, 0, i + 1, 0});
        });
    for (auto& t : ts)
        t.join();
    REQUIRE(w.events_written() == kThreads * kPer);
    w.close();
    Reader r;
    REQUIRE(r.open_file(path));
    std::map<std::uint64_t, std::uint64_t> next_ptr; // per stream (thread): expected next ptr
    Event e;
    std::uint64_t n = 0;
    while (r.next(e)) {
        REQUIRE(e.ptr == next_ptr[e.stream]);
        ++next_ptr[e.stream];
        ++n;
    }
    REQUIRE_FALSE(r.failed());
    REQUIRE(r.complete());
    REQUIRE(n == kThreads * kPer);
    std::remove(path.c_str());
}

TEST_CASE("open on an unwritable path fails with a message, record is then a no-op") {
    Writer w;
    REQUIRE_FALSE(w.open("/nonexistent/dir/t.gmt", Header{}));
    REQUIRE(w.error().find("/nonexistent/dir/t.gmt") != std::string::npos);
    w.record(Event{});
    w.flush();
    w.close();
    REQUIRE(w.events_written() == 0);
}

TEST_CASE("a trace whose recording process is alive is never truncated by a newcomer") {
    const std::string path = temp_path("owned");
    std::remove(path.c_str());
    Header owner = sample_header();
    owner.pid = 1; // init: alive, and not this process
    Writer first;
    REQUIRE(first.open(path, owner, WriterOptions{1, false}));
    first.record({EventType::alloc, 0, 0, 0x1000, 512, 512, 0, 10, 0});
    const std::vector<std::uint8_t> before = slurp(path);
    REQUIRE(before.size() > 16);

    Writer second;
    Header mine = sample_header();
    mine.pid = static_cast<std::uint64_t>(::getpid());
    CHECK_FALSE(second.open(path, mine));
    CHECK(second.busy_pid() == 1);
    CHECK(second.error().find("process 1 is recording into it") != std::string::npos);
    CHECK(slurp(path) == before); // not truncated, no second header

    // The owner goes on appending to a file that is still one trace.
    first.record({EventType::free_requested, 0, 0, 0x1000, 512, 512, 0, 11, 0});
    first.close();
    Reader r;
    REQUIRE(r.open_file(path));
    CHECK(r.header().pid == 1);
    Event e;
    int n = 0;
    while (r.next(e))
        ++n;
    CHECK_FALSE(r.failed());
    CHECK(r.complete());
    CHECK(n == 2);
    std::remove(path.c_str());
}

TEST_CASE("opening a trace waits for another process's claim of it (flock) and then sees its owner") {
    const std::string path = temp_path("claim");
    std::remove(path.c_str());
    // Another process in the middle of open(): it holds the lock and has not written its header.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);
    Writer w;
    bool opened = true;
    std::thread opener([&] {
        Header h = sample_header();
        h.pid = static_cast<std::uint64_t>(::getpid());
        opened = w.open(path, h);
    });
    ::usleep(100 * 1000);
    // Its header, naming a live process (init), then its close releases the lock.
    Header other = sample_header();
    other.pid = 1;
    const std::vector<std::uint8_t> head = encode_header(other);
    REQUIRE(::write(fd, head.data(), head.size()) == static_cast<ssize_t>(head.size()));
    ::close(fd);
    opener.join();
    CHECK_FALSE(opened);
    CHECK(w.busy_pid() == 1);
    CHECK(slurp(path) == head);
    std::remove(path.c_str());
}
