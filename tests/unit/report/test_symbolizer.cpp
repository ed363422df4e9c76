// SPDX-License-Identifier: MIT
// The process symbolizer on this test binary's own code (built with -g): file and line of known
// calls, inlined frames, demangling, and a library without debug info (module+0xoffset).
#include "report/symbolizer.hpp"
#include "stacks/backtrace.hpp"

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdio>

extern "C" int gpumemprof_nodebug_call(int (*cb)(std::uintptr_t*, int), std::uintptr_t* ips, int n);
extern "C" int gpumemprof_nodebug_local(int (*cb)(std::uintptr_t*, int), std::uintptr_t* ips, int n);

using gpumemprof::report::ProcessSymbolizer;
using gpumemprof::report::SymbolFrame;

namespace symtest {

// ips[0] lies in grab (its call of capture_backtrace), ips[1] in grab's caller.
__attribute__((noinline)) int grab(std::uintptr_t* ips, int n) {
    int k = gpumemprof::stacks::capture_backtrace(ips, n, 0);
    asm volatile("" ::: "memory");
    return k;
}

__attribute__((noinline)) int known_caller(std::uintptr_t* ips, int* line) {
    *line = __LINE__ + 1;
    int k = grab(ips, 8);
    asm volatile("" ::: "memory");
    return k;
}

__attribute__((always_inline)) inline int inlined_helper(std::uintptr_t* ips, int* line) {
    *line = __LINE__ + 1;
    int k = grab(ips, 8);
    asm volatile("" ::: "memory");
    return k;
}

__attribute__((noinline)) int calls_inline(std::uintptr_t* ips, int* line, int* call_line) {
    *call_line = __LINE__ + 1;
    int k = inlined_helper(ips, line);
    asm volatile("" ::: "memory");
    return k;
}

} // namespace symtest

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace

TEST_CASE("symbolizer: file and line of a known call in this binary", "[symbolizer]") {
    std::uintptr_t ips[8];
    int line = 0;
    REQUIRE(symtest::known_caller(ips, &line) >= 2);
    ProcessSymbolizer sym;
    const auto frames = sym.resolve(ips[1]);
    REQUIRE(frames.size() == 1);
    CHECK(ends_with(frames[0].file, "tests/unit/report/test_symbolizer.cpp"));
    CHECK(frames[0].line == line);
    CHECK(frames[0].function == "symtest::known_caller(unsigned long*, int*)");
    CHECK(frames[0].module == "test_report_symbolizer");
    // Resolved once: the second call is served from the cache.
    CHECK(sym.resolved_count() == 1);
    CHECK(sym.resolve(ips[1])[0].line == line);
    CHECK(sym.resolved_count() == 1);
}

TEST_CASE("symbolizer: an inlined helper gives two frames, innermost first", "[symbolizer]") {
    std::uintptr_t ips[8];
    int line = 0, call_line = 0;
    REQUIRE(symtest::calls_inline(ips, &line, &call_line) >= 2);
    ProcessSymbolizer sym;
    const auto frames = sym.resolve(ips[1]);
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].function == "symtest::inlined_helper(unsigned long*, int*)");
    CHECK(frames[0].line == line);
    CHECK(ends_with(frames[0].file, "test_symbolizer.cpp"));
    CHECK(frames[1].function == "symtest::calls_inline(unsigned long*, int*, int*)");
    CHECK(frames[1].line == call_line);
    CHECK(ends_with(frames[1].file, "test_symbolizer.cpp"));
}

TEST_CASE("symbolizer: demangling", "[symbolizer]") {
    using gpumemprof::report::demangle;
    CHECK(demangle("_ZN3foo3barEi") == "foo::bar(int)");
    CHECK(demangle("_ZNK3foo3Baz3getERKSt6vectorIiSaIiEE") ==
          "foo::Baz::get(std::vector<int, std::allocator<int> > const&) const");
    CHECK(demangle("main") == "main");
    CHECK(demangle("_Zbogus") == "_Zbogus");
    CHECK(demangle(nullptr).empty());
}

TEST_CASE("symbolizer: a library without debug info gives module+0xoffset", "[symbolizer]") {
    std::uintptr_t ips[8];
    const int n = gpumemprof_nodebug_call(&symtest::grab, ips, 8);
    REQUIRE(n >= 2);
    Dl_info info{};
    REQUIRE(dladdr(reinterpret_cast<void*>(ips[1]), &info) != 0);
    const auto offset = ips[1] - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
    ProcessSymbolizer sym;
    const auto frames = sym.resolve(ips[1]);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].file.empty());
    CHECK(frames[0].line == 0);
    CHECK(frames[0].module == "libgpumemprof_nodebug_test.so");
    CHECK(frames[0].offset == offset);
    CHECK(frames[0].function == "gpumemprof_nodebug_call");
    char want[128];
    std::snprintf(want, sizeof want, "libgpumemprof_nodebug_test.so+0x%zx:gpumemprof_nodebug_call",
                  static_cast<std::size_t>(offset));
    CHECK(gpumemprof::report::frame_label(frames[0]) == want);
}

TEST_CASE("symbolizer: without debug info, each frame is named by the ELF symbol around it", "[symbolizer]") {
    // A local function (in the library's own symbol table only) called by an exported one: the
    // two frames get their own names, not the nearest exported symbol's.
    std::uintptr_t ips[8];
    REQUIRE(gpumemprof_nodebug_local(&symtest::grab, ips, 8) >= 3);
    ProcessSymbolizer sym;
    CHECK(sym.resolve(ips[1])[0].function ==
          "(anonymous namespace)::local_step(int (*)(unsigned long*, int), unsigned long*, int)");
    CHECK(sym.resolve(ips[2])[0].function == "gpumemprof_nodebug_local");
    // The same code under a global and a weak name: the global one, as dwfl_module_addrinfo picks.
    const auto call = reinterpret_cast<std::uintptr_t>(&gpumemprof_nodebug_call);
    CHECK(sym.resolve(call + 1)[0].function == "gpumemprof_nodebug_call");
    CHECK(sym.resolve(call + 1)[0].offset == sym.resolve(call)[0].offset + 1);
}

TEST_CASE("symbolizer: an address in no module", "[symbolizer]") {
    ProcessSymbolizer sym;
    const auto frames = sym.resolve(0x10);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].module == "??");
    CHECK(frames[0].file.empty());
    CHECK(gpumemprof::report::frame_label(frames[0]) == "??+0x10");
}
