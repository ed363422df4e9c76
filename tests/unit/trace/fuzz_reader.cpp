// SPDX-License-Identifier: MIT
// Fuzz harness for trace::Reader (libFuzzer entry point when built with -DGPUMEMPROF_LIBFUZZER).
#include "fuzz_reader.hpp"

#include "trace/crc32.hpp"
#include "trace/format.hpp"
#include "trace/reader.hpp"

#include <cstring>
#include <string>

namespace gpumemprof::trace::fuzz {
namespace {

std::uint32_t load_u32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

void store_u32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
        p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint64_t check_one(const std::uint8_t* data, std::size_t size) {
    Reader r;
    std::uint64_t n = 0;
    if (r.open_memory(data, size)) {
        Event ev;
        while (r.next(ev))
            ++n;
    }
    if (r.failed()) {
        const std::string prefix = "byte offset " + std::to_string(r.error_offset()) + ": ";
        if (r.error().compare(0, prefix.size(), prefix) != 0 || r.error_offset() > size)
            __builtin_trap();
    }
    if (n != r.events_read())
        __builtin_trap();
    return n;
}

} // namespace

void repair_crcs(std::vector<std::uint8_t>& b) {
    if (b.size() < kFileHeaderFixedBytes)
        return;
    const std::uint64_t body = load_u32(b.data() + 12);
    std::uint64_t pos = kFileHeaderFixedBytes + body;
    if (pos + 4 > b.size())
        return;
    store_u32(b.data() + pos, crc32(0, b.data(), static_cast<std::size_t>(pos)));
    pos += 4;
    while (pos + kBlockHeaderBytes <= b.size()) {
        std::uint8_t* h = b.data() + pos;
        const std::uint32_t len = load_u32(h + 4);
        if (len > b.size() - pos - kBlockHeaderBytes)
            return;
        std::uint32_t c = crc32(0, h + 4, 8);
        c = crc32(c, h + kBlockHeaderBytes, len);
        store_u32(h + 12, c);
        pos += kBlockHeaderBytes + len;
    }
}

std::uint64_t read_all(const std::uint8_t* data, std::size_t size) {
    const std::uint64_t n = check_one(data, size);
    std::vector<std::uint8_t> copy(data, data + size);
    repair_crcs(copy);
    check_one(copy.data(), copy.size());
    return n;
}

} // namespace gpumemprof::trace::fuzz

#ifdef GPUMEMPROF_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    gpumemprof::trace::fuzz::read_all(data, size);
    return 0;
}
#endif
