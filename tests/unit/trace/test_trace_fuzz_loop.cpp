// SPDX-License-Identifier: MIT
// Deterministic mutation fuzzing of trace::Reader: 20,000 mutated files, built with ASan/UBSan.
// (The libFuzzer target, when clang is present, explores further; this one always runs.)
#include "fuzz_reader.hpp"

#include "trace/format.hpp"
#include "trace/writer.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gpumemprof::trace;

int main() {
    const std::string path = "/tmp/gpumemprof_fuzz_seed_" + std::to_string(::getpid()) + ".gmt";
    {
        Header h;
        h.pid = 7;
        h.host = "fuzz";
        h.exe = "/bin/true";
        h.alloc_conf = "max_split_size_mb:64";
        h.devices = {{0, 1ull << 34}, {1, 1ull << 33}};
        h.metadata = {{"k", "v"}};
        Writer w;
        if (!w.open(path, h, WriterOptions{7, false}))
            return 1;
        std::mt19937_64 rng(1);
        for (int i = 0; i < 60; ++i) {
            Event e;
            e.type = static_cast<EventType>(1 + i % kMaxEventType);
            e.device = static_cast<std::uint32_t>(i % 3);
            e.stream = rng() % 4;
            e.ptr = 0x7f0000000000ull + (rng() % 4096) * 512;
            e.size = rng() % (64u << 20);
            e.block_size = e.size + rng() % 1024;
            e.stack_id = rng() % 5;
            e.time_ns = 1000 + static_cast<std::uint64_t>(i) * 17;
            e.device_free = rng();
            e.context = static_cast<std::uint64_t>(i % 5 == 0); // version 3 extension bytes
            e.pool_id = {static_cast<std::uint64_t>(i % 7 == 0), static_cast<std::uint64_t>(i % 11 == 0) * 9};
            w.record(e);
        }
        w.close();
    }
    std::ifstream in(path, std::ios::binary);
    const std::vector<std::uint8_t> seed{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::remove(path.c_str());
    if (fuzz::read_all(seed.data(), seed.size()) != 60) {
        std::fprintf(stderr, "seed file does not read back 60 events\n");
        return 1;
    }

    std::mt19937_64 rng(20240601);
    std::uint64_t events = 0;
    constexpr int kIterations = 20000;
    for (int it = 0; it < kIterations; ++it) {
        std::vector<std::uint8_t> b = seed;
        const int mutations = 1 + static_cast<int>(rng() % 4);
        for (int m = 0; m < mutations && !b.empty(); ++m) {
            const std::size_t at = rng() % b.size();
            switch (rng() % 7) {
            case 0: b[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8)); break; // bit flip
            case 1: b[at] = static_cast<std::uint8_t>(rng()); break;              // random byte
            case 2: b.resize(at); break;                                          // truncate
            case 3: b.insert(b.begin() + static_cast<long>(at), static_cast<std::uint8_t>(rng())); break;
            case 4: b.erase(b.begin() + static_cast<long>(at)); break; // delete
            case 5: { // interesting 32-bit values (lengths, counts, version)
                static const std::uint32_t vals[] = {0, 1, 0x7F, 0x80, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1u << 26};
                const std::uint32_t v = vals[rng() % 8];
                for (int i = 0; i < 4 && at + i < b.size(); ++i)
                    b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
                break;
            }
            default: { // duplicate a chunk
                const std::size_t len = 1 + rng() % 64;
                const std::size_t from = rng() % b.size();
                std::vector<std::uint8_t> chunk(b.begin() + static_cast<long>(from),
                                                b.begin() + static_cast<long>(std::min(b.size(), from + len)));
                b.insert(b.begin() + static_cast<long>(at), chunk.begin(), chunk.end());
            }
            }
        }
        events += fuzz::read_all(b.data(), b.size());
    }
    std::printf("%d mutated traces read without a crash (%llu events decoded from them as-is)\n", kIterations,
                static_cast<unsigned long long>(events));
    return 0;
}
