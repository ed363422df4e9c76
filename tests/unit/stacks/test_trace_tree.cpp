// SPDX-License-Identifier: MIT
// Trace tree: equal stacks intern to equal ids, shared outer frames share nodes, frames come back.
#include "stacks/trace_tree.hpp"

#include <catch2/catch.hpp>

#include <thread>
#include <vector>

using gpumemprof::stacks::StackId;
using gpumemprof::stacks::TraceTree;

TEST_CASE("trace tree: ids are stable and frames recovered innermost first", "[trace_tree]") {
    TraceTree t;
    const std::uintptr_t a[] = {0x1010, 0x2020, 0x3030}; // leaf .. root
    const std::uintptr_t b[] = {0x1111, 0x2020, 0x3030}; // same caller chain, other leaf
    const std::uintptr_t c[] = {0x2020, 0x3030};         // the common suffix itself

    const StackId ia = t.intern(a, 3);
    const StackId ib = t.intern(b, 3);
    REQUIRE(ia != 0);
    REQUIRE(ib != 0);
    CHECK(ia != ib);
    CHECK(t.intern(a, 3) == ia);
    CHECK(t.intern(b, 3) == ib);
    // Nodes: 0x3030, 0x3030->0x2020, ->0x1010, ->0x1111 = 4.
    CHECK(t.size() == 4);
    const StackId ic = t.intern(c, 2);
    CHECK(t.size() == 4); // the suffix already exists as an inner node
    CHECK(ic != ia);
    CHECK(t.frames(ia) == std::vector<std::uintptr_t>{0x1010, 0x2020, 0x3030});
    CHECK(t.frames(ib) == std::vector<std::uintptr_t>{0x1111, 0x2020, 0x3030});
    CHECK(t.frames(ic) == std::vector<std::uintptr_t>{0x2020, 0x3030});
    // A different root with the same leaf is a different stack.
    const std::uintptr_t d[] = {0x1010, 0x2020, 0x4040};
    CHECK(t.intern(d, 3) != ia);
    CHECK(t.size() == 7);
}

TEST_CASE("trace tree: empty stacks and unknown ids", "[trace_tree]") {
    TraceTree t;
    CHECK(t.intern(nullptr, 3) == 0);
    const std::uintptr_t a[] = {1};
    CHECK(t.intern(a, 0) == 0);
    CHECK(t.frames(0).empty());
    CHECK(t.frames(12345).empty());
}

TEST_CASE("trace tree: 100000 distinct stacks survive table growth", "[trace_tree]") {
    TraceTree t;
    std::vector<StackId> ids;
    for (std::uintptr_t i = 0; i < 100000; ++i) {
        const std::uintptr_t s[] = {0x500000 + i * 16, 0x400000 + (i % 7), 0x300000};
        ids.push_back(t.intern(s, 3));
    }
    // Nodes: root frame 1 + middle frames 7 + leaves 100000.
    CHECK(t.size() == 100008);
    for (std::uintptr_t i = 0; i < 100000; i += 997) {
        const std::uintptr_t s[] = {0x500000 + i * 16, 0x400000 + (i % 7), 0x300000};
        CHECK(t.intern(s, 3) == ids[i]);
        CHECK(t.frames(ids[i]) == std::vector<std::uintptr_t>{s[0], s[1], s[2]});
    }
}

TEST_CASE("trace tree: threads interning the same stacks agree on ids", "[trace_tree][threads]") {
    TraceTree t;
    constexpr int kThreads = 8;
    constexpr int kStacks = 2000;
    std::vector<std::vector<StackId>> got(kThreads, std::vector<StackId>(kStacks));
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th) {
        threads.emplace_back([&, th] {
            // Each thread walks the stacks in a different order to interleave insertions.
            // The second pass is answered mostly by the thread's own stack cache; both must agree.
            for (int pass = 0; pass < 2; ++pass) {
                for (int k = 0; k < kStacks; ++k) {
                    const int i = (k + th * 251) % kStacks;
                    const std::uintptr_t s[] = {static_cast<std::uintptr_t>(0x9000 + i), 0x8000, 0x7000};
                    const StackId id = t.intern(s, 3);
                    if (pass == 0)
                        got[th][i] = id;
                    else if (id != got[th][i])
                        got[th][i] = 0; // reported below
                }
            }
        });
    }
    for (auto& th : threads)
        th.join();
    for (int i = 0; i < kStacks; ++i) {
        for (int th = 1; th < kThreads; ++th)
            REQUIRE(got[th][i] == got[0][i]);
        REQUIRE(t.frames(got[0][i]) ==
                std::vector<std::uintptr_t>{static_cast<std::uintptr_t>(0x9000 + i), 0x8000, 0x7000});
    }
    CHECK(t.size() == kStacks + 2);
}

TEST_CASE("trace tree: the stack cache answers repeats and never mixes stacks or trees", "[trace_tree]") {
    TraceTree t;
    // 3000 distinct stacks that share all but their innermost or outermost frame: more than the
    // cache holds, so entries are evicted and refilled, and neighbouring stacks hash close.
    std::vector<std::vector<std::uintptr_t>> stacks;
    for (std::uintptr_t i = 0; i < 1500; ++i) {
        stacks.push_back({0x400000 + i, 0x500000, 0x600000});
        stacks.push_back({0x400000, 0x500000, 0x600000 + i + 1});
    }
    std::vector<StackId> ids;
    for (const auto& s : stacks) {
        bool cached = true;
        ids.push_back(t.intern(s.data(), static_cast<int>(s.size()), &cached));
        CHECK_FALSE(cached); // first sight of each stack goes through the tree
    }
    std::size_t hits = 0;
    for (int round = 0; round < 3; ++round) {
        for (std::size_t i = 0; i < stacks.size(); ++i) {
            bool cached = false;
            REQUIRE(t.intern(stacks[i].data(), static_cast<int>(stacks[i].size()), &cached) == ids[i]);
            hits += cached ? 1 : 0;
        }
    }
    CHECK(hits > 0);
    for (std::size_t i = 0; i < stacks.size(); ++i)
        CHECK(t.frames(ids[i]) == stacks[i]);
    // A prefix of a cached stack is another stack (its own id), not a cache hit.
    bool cached = true;
    const StackId prefix = t.intern(stacks[0].data(), 2, &cached);
    CHECK_FALSE(cached);
    CHECK(prefix != ids[0]);
    CHECK(t.frames(prefix) == std::vector<std::uintptr_t>{stacks[0][0], stacks[0][1]});

    // A second tree used on the same thread must not get the first tree's ids from the cache.
    TraceTree other;
    const std::uintptr_t x[] = {0x9000, 0x9100};
    const StackId ox = other.intern(x, 2);
    const StackId o0 = other.intern(stacks[5].data(), 3, &cached);
    CHECK_FALSE(cached);
    CHECK(other.frames(o0) == stacks[5]);
    CHECK(other.frames(ox) == std::vector<std::uintptr_t>{0x9000, 0x9100});
    CHECK(other.size() == 2 + 3);
    // And back on the first tree, ids are still right.
    CHECK(t.intern(stacks[5].data(), 3) == ids[5]);
}

// Two stacks that differ in one frame only, used by turns (one framework operator after another,
// from two lines of one function): each keeps its own cache entry, whichever frame differs. A
// hash whose entry index left out some frames put such a pair in one entry, each pushing the
// other out at every use (HF generate interned 17% of its stacks through the tree that way).
TEST_CASE("trace tree: stacks differing in any one frame each stay in the cache", "[trace_tree]") {
    TraceTree t;
    for (int n : {23, 24, 26}) {
        for (int at = 0; at < n; ++at) {
            std::vector<std::uintptr_t> x(static_cast<std::size_t>(n)), y;
            for (int i = 0; i < n; ++i)
                x[static_cast<std::size_t>(i)] = 0x7f0000001000 + 0x40 * static_cast<std::uintptr_t>(i);
            y = x;
            y[static_cast<std::size_t>(at)] += 9;
            const StackId ix = t.intern(x.data(), n);
            const StackId iy = t.intern(y.data(), n);
            REQUIRE(ix != iy);
            int hits = 0;
            for (int round = 0; round < 4; ++round) {
                bool cached = false;
                CHECK(t.intern(x.data(), n, &cached) == ix);
                hits += cached ? 1 : 0;
                CHECK(t.intern(y.data(), n, &cached) == iy);
                hits += cached ? 1 : 0;
            }
            INFO("stack of " << n << " frames, differing at frame " << at);
            CHECK(hits == 8);
        }
    }
}
