// SPDX-License-Identifier: MIT
// The calling thread's Python frames, read on the hot path without the GIL and without calling
// into Python: the interpreter's own structures are walked with per-version layouts (CPython
// 3.11 and 3.12 fixed, 3.13-3.15 from _PyRuntime's _Py_DebugOffsets). Each frame becomes one tagged
// word that the trace tree interns like a code address; names and line tables are copied once per
// code object and turned into file:line:function at report time (python::describe).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpumemprof::stacks::python {

/// A Python frame in an interned stack: bit 63 set (no user-space code address has it), bit 62 =
/// "entry frame" (the outermost frame run by one call of the interpreter's eval loop), bits
/// 32..61 = index of the code object in the process-wide code table, bits 0..31 = instruction
/// offset in code units.
inline constexpr std::uintptr_t kPythonTag = std::uintptr_t{1} << 63;
inline constexpr std::uintptr_t kEntryTag = std::uintptr_t{1} << 62;
inline constexpr bool is_python_frame(std::uintptr_t w) noexcept {
    return (w & kPythonTag) != 0;
}
inline constexpr bool is_entry_frame(std::uintptr_t w) noexcept {
    return (w & kEntryTag) != 0;
}

/// Python frames kept per stack at most (beside the native ones).
inline constexpr int kMaxPythonFrames = 128;

enum class State {
    unknown,     ///< not looked yet, or Python not initialised yet
    absent,      ///< no interpreter in this process: capture costs one load from now on
    ready,       ///< a supported interpreter: frames are read
    unsupported, ///< an interpreter we cannot read (version, free-threaded): warned once
    disabled,    ///< GPUMEMPROF_PYTHON=0
};

/// GPUMEMPROF_PYTHON: false stops reading Python frames (native stacks only).
void set_enabled(bool on) noexcept;
/// GPUMEMPROF_CODE_WATCHER: false adds no code watcher (3.12+; see python_frames.cpp), before the
/// first capture.
void set_code_watcher(bool on) noexcept;
/// Where the one "cannot read this Python" warning goes (default: stderr). The core passes its
/// logger; the stacks area itself depends on nothing else.
void set_warning_sink(void (*sink)(const char* message)) noexcept;

/// Writes the calling thread's Python frames, innermost first, as tagged words into out[0..max).
/// Never takes the GIL, never runs Python code, never throws; allocates only the first time it
/// meets a code object (copies its names and line table). The first call asks the main thread,
/// through Py_AddPendingCall, to add the code watcher (set_code_watcher). Returns the number written (0 when the
/// thread runs no Python code or the process has no readable interpreter).
/// `serial`, when given, gets a number per thread that stays the same from one call to the next
/// only when the words written are certainly the same (same `max`, nothing read otherwise than
/// before): the caller may then keep what it made of them without comparing them.
/// `compared`, when given, gets how many of the words were taken by comparing the stack with the
/// thread's previous capture rather than by walking it; `trusted`, how many of those the compare
/// took without reading their code objects (3.12+: no code object destroyed since that capture,
/// as a code watcher counts; see python_frames.cpp).
int capture(std::uintptr_t* out, int max, std::uint64_t* serial = nullptr, int* compared = nullptr,
            int* trusted = nullptr) noexcept;

/// 3.12+: where the entry shims of the calling thread's Python frame chain are, innermost first, at
/// most `max`. Each call of the eval loop pushes one below the first frame it runs, as a local of
/// that call's C frame: the native frame whose stack frame holds it is the eval loop's
/// (eval_loop_sites.hpp). 0 when the interpreter has no such shims (3.11) or none is read.
int shim_addresses(std::uintptr_t* out, int max) noexcept;

State state() noexcept;
/// "3.12" etc. once an interpreter was found; empty before.
std::string version();

/// A tagged word turned into source terms. False for an unknown code index.
struct FrameInfo {
    std::string file;
    std::string function; ///< the code object's qualified name
    int line = 0;         ///< 0 when the instruction has no line
    bool entry = false;
};
bool describe(std::uintptr_t word, FrameInfo* out);

/// The line of instruction `offset` (code units) in a CPython 3.11+ location table
/// (Objects/locations.md); -1 for an instruction without a line or an offset past the table.
int line_for_offset(const unsigned char* table, std::size_t size, int first_line, int offset) noexcept;

/// Every layout fact the reader assumes for CPython 3.`minor` (11, 12: struct offsets; 13-15: the
/// offsets of the fields it reads inside _Py_DebugOffsets), as (name, value). The test
/// tests/python/check_layouts.py compares them with the real headers of each installed Python.
std::vector<std::pair<std::string, std::size_t>> assumed_layout(int minor);

/// fork support: the locks are taken before fork and released after it in both processes (the
/// child's copies of the code table stay valid: same addresses, same code objects).
void lock_for_fork() noexcept;
void unlock_after_fork() noexcept;

} // namespace gpumemprof::stacks::python
