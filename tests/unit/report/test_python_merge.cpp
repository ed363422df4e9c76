// SPDX-License-Identifier: MIT
// report/resolved_stacks: Python frames (stacks::python tagged words) merged in place of the
// interpreter's eval-loop frames; the autograd label for engine threads.
#include "fake_symbolizer.hpp"
#include "report/resolved_stacks.hpp"
#include "stacks/python_frames.hpp"

#include <catch2/catch.hpp>

using namespace gpumemprof;

namespace {

/// Python frame words for code indices the table does not know ("[unknown Python frame]").
std::uintptr_t py(std::uint32_t index, bool entry) {
    return stacks::python::kPythonTag | (entry ? stacks::python::kEntryTag : 0) |
           (static_cast<std::uintptr_t>(index) << 32) | 7;
}

std::vector<std::string> kinds(const std::vector<report::SymbolFrame>& frames) {
    std::vector<std::string> out;
    for (const auto& f : frames)
        out.push_back(f.python ? "py" : f.function);
    return out;
}

report::ResolvedReport resolve(test::FakeSymbolizer& sym, std::vector<std::uintptr_t> ips,
                               report::PythonFrames mode = report::PythonFrames::merged) {
    static stacks::ReportData data; // resolve_report keeps pointers into OOM records only
    data = stacks::ReportData{};
    stacks::SiteData s;
    s.id = 1;
    s.frames = std::move(ips);
    s.counters.total_bytes = 1;
    data.sites.push_back(s);
    return report::resolve_report(data, sym, {}, {}, mode);
}

} // namespace

TEST_CASE("each eval-loop frame is replaced by the Python frames up to the next entry frame", "[python]") {
    test::FakeSymbolizer sym;
    sym.add(0x10, "op", "op.cpp", 1);
    sym.add(0x20, "_PyEval_EvalFrameDefault", "ceval.c", 1, "libpython3.12.so.1.0");
    sym.add(0x30, "PyObject_Call", "call.c", 1, "libpython3.12.so.1.0");
    sym.add(0x40, "ext_fn", "ext.c", 1, "ext.so");
    sym.add(0x50, "_PyEval_EvalFrameDefault.cold", "ceval.c", 1, "libpython3.12.so.1.0");
    sym.add(0x60, "Py_RunMain", "main.c", 1, "libpython3.12.so.1.0");
    sym.add(0x70, "__libc_start_main", "libc-start.c", 1, "libc.so.6");
    // Innermost first: native frames, then the thread's Python frames (inner group: one entry
    // frame; outer group: two frames, the outer one the entry).
    const std::vector<std::uintptr_t> ips = {0x10, 0x20, 0x30,          0x40,           0x50,
                                             0x60, 0x70, py(900, true), py(901, false), py(902, true)};
    auto r = resolve(sym, ips);
    REQUIRE(r.sites.size() == 1);
    // Root first: the outer group, the extension that called back into Python, the inner group.
    CHECK(kinds(r.frames_of(r.sites[0].stack)) == std::vector<std::string>{"py", "py", "ext_fn", "py", "op"});
    CHECK(r.frames_of(r.sites[0].stack)[0].function == "[unknown Python frame]");

    // GPUMEMPROF_PYTHON=all keeps the interpreter: each eval loop sits above the code it runs.
    auto all = resolve(sym, ips, report::PythonFrames::all);
    CHECK(kinds(all.frames_of(all.sites[0].stack)) ==
          std::vector<std::string>{"__libc_start_main", "Py_RunMain", "_PyEval_EvalFrameDefault.cold", "py", "py",
                                   "ext_fn", "PyObject_Call", "_PyEval_EvalFrameDefault", "py", "op"});
}

TEST_CASE("a stripped libc's nameless start-up frames do not root a Python stack", "[python]") {
    test::FakeSymbolizer sym;
    sym.add(0x10, "op", "op.cpp", 1);
    sym.add(0x20, "_PyEval_EvalFrameDefault", "ceval.c", 1, "libpython3.12.so.1.0");
    sym.add(0x30, "Py_BytesMain", "main.c", 1, "python3.12");
    sym.add(0x40, "", "", 0, "libc.so.6"); // Ubuntu: __libc_start_call_main has no symbol
    sym.add(0x50, "", "", 0, "libc.so.6");
    sym.add(0x60, "_start", "", 0, "python3.12");
    auto r = resolve(sym, {0x10, 0x20, 0x30, 0x40, 0x50, 0x60, py(5, true)});
    CHECK(kinds(r.frames_of(r.sites[0].stack)) == std::vector<std::string>{"py", "op"});
    // A native-only stack keeps them (nothing stands in for them there).
    auto native = resolve(sym, {0x10, 0x40});
    CHECK(native.frames_of(native.sites[0].stack).size() == 2);
}

TEST_CASE("Python frames the native stack did not reach go on the outer end", "[python]") {
    test::FakeSymbolizer sym;
    sym.add(0x10, "op", "op.cpp", 1);
    sym.add(0x20, "caller", "caller.cpp", 1);
    auto r = resolve(sym, {0x10, 0x20, py(1, false), py(2, true)});
    CHECK(kinds(r.frames_of(r.sites[0].stack)) == std::vector<std::string>{"py", "py", "caller", "op"});
}

TEST_CASE("autograd engine threads without Python frames are rooted at [autograd backward]", "[python]") {
    test::FakeSymbolizer sym;
    sym.add(0x10, "at::native::mm", "mm.cpp", 1, "libtorch_cuda.so");
    sym.add(0x20, "torch::autograd::Engine::evaluate_function(...)", "engine.cpp", 1, "libtorch_cpu.so");
    sym.add(0x30, "torch::autograd::Engine::thread_main(...)", "engine.cpp", 1, "libtorch_cpu.so");
    auto r = resolve(sym, {0x10, 0x20, 0x30});
    REQUIRE(!r.frames_of(r.sites[0].stack).empty());
    CHECK(report::frame_label(r.frames_of(r.sites[0].stack).front()) == "[autograd backward]");
    CHECK(r.frames_of(r.sites[0].stack).back().function == "at::native::mm");
    // An ordinary native stack gets no label.
    auto plain = resolve(sym, {0x10});
    CHECK(kinds(plain.frames_of(plain.sites[0].stack)) == std::vector<std::string>{"at::native::mm"});
}

TEST_CASE("the 3.11+ location table gives the line of an instruction", "[python]") {
    // Entries (first byte 1cccclll: code, length-1): code 13 (no columns) with line delta +2 for
    // 2 units; code 10 (one-line form, delta 0) for 1 unit with two column bytes; code 15 (no
    // location) for 1 unit; code 14 (long form) delta -1 for 3 units with end-line, column, end-column.
    const unsigned char table[] = {0x80 | (13 << 3) | 1, 4,           // +2 (svarint 4 = +2)
                                   0x80 | (11 << 3) | 0, 5, 9,        // one-line form, +1
                                   0x80 | (15 << 3) | 0,              // no line
                                   0x80 | (14 << 3) | 2, 3, 0, 1, 2}; // -1 (svarint 3 = -1)
    CHECK(stacks::python::line_for_offset(table, sizeof table, 10, 0) == 12);
    CHECK(stacks::python::line_for_offset(table, sizeof table, 10, 1) == 12);
    CHECK(stacks::python::line_for_offset(table, sizeof table, 10, 2) == 13);
    CHECK(stacks::python::line_for_offset(table, sizeof table, 10, 3) == -1);
    CHECK(stacks::python::line_for_offset(table, sizeof table, 10, 4) == 12);
    CHECK(stacks::python::line_for_offset(table, sizeof table, 10, 6) == 12);
    CHECK(stacks::python::line_for_offset(table, sizeof table, 10, 7) == -1); // past the table
}
