// SPDX-License-Identifier: MIT
// Reading the calling thread's Python frames without the GIL (see python_frames.hpp).
//
// Why this is safe: the frames read are the calling thread's own. While this thread is inside our
// hook it is not running bytecode, so its frame chain cannot change under us, whether it holds
// the GIL (ctypes.PyDLL) or released it (PyTorch operators, ctypes.CDLL). Other threads never
// modify another thread's frames, code objects are immutable apart from their adaptive bytecode,
// and every object reached is kept alive by the frames of this thread. The capture calls into
// the interpreter only through PyGILState_GetThisThreadState and Py_IsInitialized, which only read
// a thread-specific key and a flag, and once through Py_AddPendingCall (all three documented as
// callable without the GIL): the main thread then adds a code watcher, holding the GIL (3.12+;
// "code objects destroyed" below).
#include "stacks/python_frames.hpp"

#include "util/log.hpp"
#include "util/per_thread.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace gpumemprof::stacks::python {

namespace {

constexpr std::size_t kNone = ~std::size_t{0};
/// A frame whose owner is this or above is one the interpreter pushes for itself, not Python code:
/// 3.12/3.13's FRAME_OWNED_BY_CSTACK (the eval loop's entry shim, on the C stack); 3.14's
/// FRAME_OWNED_BY_INTERPRETER (that shim now, and 3.15's base frame in the thread state) and its
/// FRAME_OWNED_BY_CSTACK (4) above it.
constexpr char kShimOwner = 3;

/// Where the interpreter keeps what we read. Offsets in bytes; kNone when the field does not
/// exist in that version. tests/unit/stacks/python_layouts checks each against the real headers.
struct Layout {
    int minor = 0;
    // PyThreadState -> current frame: 3.11/3.12 through tstate->cframe->current_frame, 3.13 direct.
    std::size_t ts_cframe = kNone;
    std::size_t cframe_current_frame = kNone;
    std::size_t ts_current_frame = kNone;
    std::size_t ts_interp = 16; ///< PyThreadState -> its interpreter
    // _PyInterpreterFrame
    std::size_t fr_code = 0;     ///< f_code (3.11/3.12), f_executable (3.13; 3.14+ a tagged _PyStackRef)
    bool fr_code_tagged = false; ///< 3.14+: f_executable's low two bits are tags (Py_TAG_BITS)
    std::size_t fr_previous = 0;
    std::size_t fr_instr = 0; ///< prev_instr (3.11/3.12), instr_ptr (3.13)
    std::size_t fr_owner = 0;
    std::size_t fr_is_entry = kNone; ///< 3.11 only; later versions mark entries with a shim frame
    // PyCodeObject
    std::size_t co_filename = 0, co_qualname = 0, co_linetable = 0, co_firstlineno = 0, co_code = 0;
    /// co_version (3.12+): a number each new code object takes from a counter of the interpreter
    /// that only goes up (0 once it ran out). kNone in 3.11.
    std::size_t co_version = kNone;
    // PyObject, PyBytesObject, PyASCIIObject / PyCompactUnicodeObject
    std::size_t ob_type = 8;
    std::size_t bytes_size = 16, bytes_sval = 32;
    std::size_t str_length = 16, str_state = 32, str_ascii_size = 0, str_compact_size = 0;
};

/// CPython 3.11 (Include/internal/pycore_frame.h, Include/cpython/pystate.h, code.h).
Layout layout_311() {
    Layout l;
    l.minor = 11;
    l.ts_cframe = 56;
    l.cframe_current_frame = 8;
    l.fr_code = 32;
    l.fr_previous = 48;
    l.fr_instr = 56;
    l.fr_is_entry = 68;
    l.fr_owner = 69;
    l.co_firstlineno = 72;
    l.co_filename = 112;
    l.co_qualname = 128;
    l.co_linetable = 136;
    l.co_code = 184;
    l.str_ascii_size = 48; // 3.11 still has the wstr pointer
    l.str_compact_size = 72;
    return l;
}

/// CPython 3.12.
Layout layout_312() {
    Layout l;
    l.minor = 12;
    l.ts_cframe = 56;
    l.cframe_current_frame = 0;
    l.fr_code = 0;
    l.fr_previous = 8;
    l.fr_instr = 56;
    l.fr_owner = 70;
    l.co_firstlineno = 68;
    l.co_version = 92;
    l.co_filename = 112;
    l.co_qualname = 128;
    l.co_linetable = 136;
    l.co_code = 192;
    l.str_ascii_size = 40;
    l.str_compact_size = 56;
    return l;
}

/// Where the frame walk reads, as constants (3.12, and 3.13+ when its _Py_DebugOffsets say the
/// same): the compiler then keeps the whole walk in registers.
struct Fixed312 {
    static constexpr std::size_t previous = 8, owner = 70, code = 0, instr = 56, co_code = 192, version = 92;
    static constexpr bool check_type = false; // a 3.12 frame's f_code is always a code object
    static constexpr bool function_versions = false;
    static constexpr std::uintptr_t code_tags = 0;
};
struct Fixed313 {
    static constexpr std::size_t previous = 8, owner = 70, code = 0, instr = 56, co_code = 200, version = 92;
    static constexpr bool check_type = true; // f_executable may be another object
    static constexpr bool function_versions = false;
    static constexpr std::uintptr_t code_tags = 0;
};
/// 3.14 and 3.15: the frame's owner moved past a new field, the code objects' bytecode past
/// another, and f_executable is a _PyStackRef, whose low bits say how it holds its reference.
struct Fixed314 {
    static constexpr std::size_t previous = 8, owner = 74, code = 0, instr = 56, co_code = 208, version = 92;
    static constexpr bool check_type = true;
    static constexpr bool function_versions = false;
    static constexpr std::uintptr_t code_tags = 3;
};
/// 3.11, whose code objects have no versions: its compare pass knows a frame's code object by the
/// frame's function object and that function's version (func_version: a number from a counter
/// that only goes up, taken at specialisation and given up, back to 0, when the function's code
/// changes), and marks entries in the frame itself (is_entry).
struct Fixed311 {
    static constexpr std::size_t previous = 48, code = 32, instr = 56, is_entry = 68, co_code = 184;
    static constexpr std::size_t func = 0, func_code = 48, func_version = 128;
    static constexpr bool function_versions = true;
    static constexpr std::uintptr_t code_tags = 0;
};

/// Where, in CPython 3.13+'s _Py_DebugOffsets (the table at the start of _PyRuntime that the
/// interpreter fills for readers outside it: Include/internal/pycore_debug_offsets.h, 3.13's
/// pycore_runtime.h), each offset we read is kept. The table grows with each minor version, so
/// these are per version; check_layouts.py checks them against each version's own headers.
/// The offsets read from it: the Layout field each one fills, and its name in the table.
#define GPUMEMPROF_DEBUG_FIELDS(X)                                                                                     \
    X(ts_current_frame, "thread_state.current_frame")                                                                  \
    X(ts_interp, "thread_state.interp")                                                                                \
    X(fr_previous, "interpreter_frame.previous")                                                                       \
    X(fr_code, "interpreter_frame.executable")                                                                         \
    X(fr_instr, "interpreter_frame.instr_ptr")                                                                         \
    X(fr_owner, "interpreter_frame.owner")                                                                             \
    X(co_filename, "code_object.filename")                                                                             \
    X(co_qualname, "code_object.qualname")                                                                             \
    X(co_linetable, "code_object.linetable")                                                                           \
    X(co_firstlineno, "code_object.firstlineno")                                                                       \
    X(co_code, "code_object.co_code_adaptive")                                                                         \
    X(ob_type, "pyobject.ob_type")                                                                                     \
    X(bytes_size, "bytes_object.ob_size")                                                                              \
    X(bytes_sval, "bytes_object.ob_sval")                                                                              \
    X(str_state, "unicode_object.state")                                                                               \
    X(str_length, "unicode_object.length")                                                                             \
    X(str_ascii_size, "unicode_object.asciiobject_size")
#define GPUMEMPROF_MEMBER(field, name) std::size_t field;
struct DebugFields {
    int minor;
    std::size_t version, free_threaded; ///< the table's own fields
    GPUMEMPROF_DEBUG_FIELDS(GPUMEMPROF_MEMBER)
};
#undef GPUMEMPROF_MEMBER
constexpr DebugFields kDebugFields[] = {
    {13, 8, 16, 184, 176, 232, 240, 248, 264, 280, 296, 304, 312, 344, 360, 520, 528, 544, 552, 560},
    {14, 8, 16, 208, 200, 256, 264, 272, 288, 320, 336, 344, 352, 384, 408, 600, 608, 624, 632, 640},
    {15, 8, 16, 208, 200, 320, 328, 336, 352, 384, 400, 408, 416, 448, 472, 696, 704, 720, 728, 736},
};
constexpr int kNewestMinor = 15;

const DebugFields* debug_fields(int minor) noexcept {
    for (const DebugFields& d : kDebugFields)
        if (d.minor == minor)
            return &d;
    return nullptr;
}

/// Plain reads of the interpreter's memory (memcpy: no aliasing assumptions).
template <typename T> T load(std::uintptr_t addr) noexcept {
    T v;
    std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
    return v;
}
std::uintptr_t load_ptr(std::uintptr_t addr) noexcept {
    return load<std::uintptr_t>(addr);
}
/// A frame's code object (or, 3.13+, whatever object it executes), its reference tags cleared.
template <typename F> std::uintptr_t frame_code(std::uintptr_t frame) noexcept {
    return load_ptr(frame + F::code) & ~F::code_tags;
}

// ---- the interpreter found in this process --------------------------------------------------

struct Interpreter {
    Layout layout;
    int fixed = 0; ///< 11, 12, 13 or 14 (3.14, 3.15): the walk may use Fixed3xx's offsets (they match layout)
    int (*is_initialized)() = nullptr;
    void* (*this_thread_state)() = nullptr;
    /// For the count of destroyed code objects (see "code objects destroyed" below): the pending
    /// call (3.11+), the code watcher's functions (3.12+); null when not exported.
    int (*add_pending_call)(int (*)(void*), void*) = nullptr;
    int (*add_code_watcher)(int (*)(int, void*)) = nullptr;
    void* (*interpreter_get)() = nullptr;
    void (*err_fetch)(void**, void**, void**) = nullptr;
    void (*err_restore)(void*, void*, void*) = nullptr;
    int (*at_exit)(void (*)()) = nullptr;
    std::uintptr_t code_type = 0, bytes_type = 0, unicode_type = 0;
    std::string version;
};

std::atomic<State> g_state{State::unknown};
std::atomic<bool> g_enabled{true};
Interpreter g_interp; // written once before g_state becomes ready (release), read after (acquire)
std::mutex g_init_mutex;

void stderr_sink(const char* message) {
    char buf[512];
    const int n =
        std::snprintf(buf, sizeof buf, "gpumemprof: warning [%d]: %s\n", static_cast<int>(::getpid()), message);
    if (n > 0) // only to the stderr the process started with (log::to_stderr)
        log::to_stderr(
            std::string_view(buf, static_cast<std::size_t>(n < static_cast<int>(sizeof buf) ? n : sizeof buf - 1)));
}
std::atomic<void (*)(const char*)> g_sink{stderr_sink};

void warn(const std::string& message) {
    g_sink.load(std::memory_order_relaxed)(message.c_str());
}

void* sym(const char* name) {
    return ::dlsym(RTLD_DEFAULT, name);
}

/// Looks for an interpreter. Returns the new state (unknown while Python is not initialised).
State discover() noexcept {
    try {
        std::lock_guard<std::mutex> lock(g_init_mutex);
        State s = g_state.load(std::memory_order_acquire);
        if (s != State::unknown)
            return s;
        if (!g_enabled.load(std::memory_order_relaxed)) {
            g_state.store(State::disabled, std::memory_order_release);
            return State::disabled;
        }
        // A statically linked python3 exports its C API (-export-dynamic); a shared libpython
        // is global in the executable's scope: either way RTLD_DEFAULT finds it.
        auto is_init = reinterpret_cast<int (*)()>(sym("Py_IsInitialized"));
        if (is_init == nullptr) {
            g_state.store(State::absent, std::memory_order_release);
            return State::absent;
        }
        if (is_init() == 0)
            return State::unknown; // look again at the next capture
        auto fail = [](const std::string& why) {
            warn("cannot read this Python's frames (" + why +
                 "): stacks of this process show native frames only (CPython 3.11 to 3.15 are supported)");
            g_state.store(State::unsupported, std::memory_order_release);
            return State::unsupported;
        };
        const auto* py_version = static_cast<const unsigned long*>(sym("Py_Version"));
        if (py_version == nullptr)
            return fail("Python older than 3.11");
        const unsigned long hex = *py_version;
        const int major = static_cast<int>((hex >> 24) & 0xff);
        const int minor = static_cast<int>((hex >> 16) & 0xff);
        Interpreter in;
        in.version = std::to_string(major) + "." + std::to_string(minor);
        if (major != 3 || minor < 11 || minor > kNewestMinor)
            return fail("Python " + in.version);
        if (minor == 11) {
            in.layout = layout_311();
        } else if (minor == 12) {
            in.layout = layout_312();
        } else {
            const DebugFields& d = *debug_fields(minor);
            const auto runtime = reinterpret_cast<std::uintptr_t>(sym("_PyRuntime"));
            const auto at = [runtime](std::size_t field) { return load<std::uint64_t>(runtime + field); };
            if (runtime == 0 || std::memcmp(reinterpret_cast<const void*>(runtime), "xdebugpy", 8) != 0 ||
                ((at(d.version) >> 16) & 0xffff) != (0x0300u | static_cast<unsigned>(minor)))
                return fail("Python " + in.version + " without the _Py_DebugOffsets table");
            if (at(d.free_threaded) != 0)
                return fail("free-threaded build");
            Layout& l = in.layout;
            l.minor = minor;
#define GPUMEMPROF_READ(field, name) l.field = at(d.field);
            GPUMEMPROF_DEBUG_FIELDS(GPUMEMPROF_READ)
#undef GPUMEMPROF_READ
            l.fr_code_tagged = minor >= 14;
            l.co_version = 92; // not in _Py_DebugOffsets; the same in 3.12-3.15 (checked by check_layouts.py)
            l.str_compact_size = l.str_ascii_size + 2 * sizeof(void*); // + utf8_length, utf8
        }
        in.is_initialized = is_init;
        in.this_thread_state = reinterpret_cast<void* (*)()>(sym("PyGILState_GetThisThreadState"));
        in.add_pending_call = reinterpret_cast<int (*)(int (*)(void*), void*)>(sym("Py_AddPendingCall"));
        if (minor >= 12) {
            in.add_code_watcher = reinterpret_cast<int (*)(int (*)(int, void*))>(sym("PyCode_AddWatcher"));
            in.interpreter_get = reinterpret_cast<void* (*)()>(sym("PyInterpreterState_Get"));
            in.err_fetch = reinterpret_cast<void (*)(void**, void**, void**)>(sym("PyErr_Fetch"));
            in.err_restore = reinterpret_cast<void (*)(void*, void*, void*)>(sym("PyErr_Restore"));
            in.at_exit = reinterpret_cast<int (*)(void (*)())>(sym("Py_AtExit"));
        }
        in.code_type = reinterpret_cast<std::uintptr_t>(sym("PyCode_Type"));
        in.bytes_type = reinterpret_cast<std::uintptr_t>(sym("PyBytes_Type"));
        in.unicode_type = reinterpret_cast<std::uintptr_t>(sym("PyUnicode_Type"));
        if (!in.this_thread_state || !in.code_type || !in.bytes_type || !in.unicode_type)
            return fail("Python " + in.version + " without PyGILState_GetThisThreadState or the type objects");
        const Layout& l = in.layout;
        if (minor == 11)
            in.fixed = 11;
        if (minor == 12)
            in.fixed = 12;
        const auto matches = [&l](auto fixed) {
            using F = decltype(fixed);
            return l.fr_previous == F::previous && l.fr_owner == F::owner && l.fr_code == F::code &&
                   l.fr_instr == F::instr && l.co_code == F::co_code && l.co_version == F::version &&
                   l.fr_code_tagged == (F::code_tags != 0);
        };
        if (minor == 13 && matches(Fixed313{}))
            in.fixed = 13;
        if (minor >= 14 && matches(Fixed314{}))
            in.fixed = 14;
        g_interp = std::move(in);
        g_state.store(State::ready, std::memory_order_release);
        return State::ready;
    } catch (...) {
        return State::unknown;
    }
}

// ---- code objects destroyed ------------------------------------------------------------------
//
// 3.12+: a code watcher (PyCode_AddWatcher) counts the code objects the interpreter destroys; 3.11,
// which has no watchers: PyCode_Type's deallocator, replaced by one that counts and calls it (every
// code object of every interpreter is destroyed through that slot, holding the GIL; the slot
// survives Py_FinalizeEx, and a capture checks that it still holds ours). While that count is what
// it was when a thread's record of its frames was made, every code object the record names is still
// that object (another one at its address needs it destroyed first), and a live frame whose
// instruction pointer is the one recorded runs inside it (two live objects do not overlap): the
// compare pass then reads two words of a frame instead of four. The watcher is added once, by the
// main thread holding the GIL, through Py_AddPendingCall, which any thread may call without the
// GIL. Until it is there, and in a thread of another interpreter, the compare pass checks each code
// object's version. Py_FinalizeEx drops the interpreter's watchers before it destroys the code
// objects: a function it calls at its very end (Py_AtExit) moves the count on, so that no record
// made before is trusted again, and an interpreter started again in this process (embedding) is
// asked for a watcher of its own.

constexpr std::uint64_t kNoEpoch = ~std::uint64_t{0};
constexpr int kCodeEventCreate = 0; // PY_CODE_EVENT_CREATE (tests/python/check_layouts.py)
constexpr int kWatcherTries = 16;   // Py_AddPendingCall fails while its queue is full

enum class Watch : int { off, unasked, asked, watching, failed };
/// What a capture reads of the watcher, in one cache line.
struct alignas(64) CodeWatch {
    std::atomic<Watch> state{Watch::unasked};
    std::atomic<int> tries{0};
    std::atomic<std::uint64_t> destroyed{0}; ///< code objects destroyed since the watcher was added
    std::atomic<std::uintptr_t> interp{0};   ///< the interpreter it watches (3.12+)
};
CodeWatch g_code_watch;

/// The watcher: any event but a creation counts (a destroyed object may be resurrected by another
/// watcher; counting it anyway only costs a full compare).
int on_code_event(int event, void*) {
    if (event != kCodeEventCreate)
        g_code_watch.destroyed.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

/// 3.11: PyCode_Type's deallocator as it was, and the one that counts before calling it.
constexpr std::size_t kTypeName = 24;    // offsetof(PyTypeObject, tp_name) (check_layouts.py)
constexpr std::size_t kTypeDealloc = 48; // offsetof(PyTypeObject, tp_dealloc)
std::atomic<void (*)(void*)> g_code_dealloc{nullptr};
void counting_code_dealloc(void* code) {
    g_code_watch.destroyed.fetch_add(1, std::memory_order_relaxed);
    g_code_dealloc.load(std::memory_order_relaxed)(code);
}

/// Run by the main thread, holding the GIL (no code object is being destroyed meanwhile).
int count_code_deallocs(void*) {
    auto* slot = reinterpret_cast<std::atomic<void (*)(void*)>*>(g_interp.code_type + kTypeDealloc);
    void (*was)(void*) = slot->load(std::memory_order_relaxed);
    if (was != counting_code_dealloc) { // (already ours: the interpreter was started again)
        // The type object laid out as assumed (a build with another object header is not).
        const auto* name = reinterpret_cast<const char* const*>(g_interp.code_type + kTypeName);
        if (was == nullptr || *name == nullptr || std::strcmp(*name, "code") != 0) {
            g_code_watch.state.store(Watch::failed, std::memory_order_relaxed);
            return 0;
        }
        g_code_dealloc.store(was, std::memory_order_relaxed);
        slot->store(counting_code_dealloc, std::memory_order_release);
    }
    g_code_watch.state.store(Watch::watching, std::memory_order_release);
    return 0;
}

/// Run at the end of Py_FinalizeEx, after everything in the interpreter was destroyed.
void on_python_exit() {
    g_code_watch.destroyed.fetch_add(1, std::memory_order_relaxed);
    g_code_watch.interp.store(0, std::memory_order_relaxed);
    g_code_watch.state.store(Watch::unasked, std::memory_order_release);
}

/// Run by the main thread, holding the GIL, between two bytecodes.
int add_watcher(void*) {
    const Interpreter& in = g_interp;
    if (in.at_exit(on_python_exit) != 0) {
        // (32 functions at most) A watcher whose end cannot be seen is not trusted.
        g_code_watch.state.store(Watch::failed, std::memory_order_relaxed);
        return 0;
    }
    void* type = nullptr;
    void* value = nullptr;
    void* traceback = nullptr;
    in.err_fetch(&type, &value, &traceback); // an exception being handled is left as it was
    const int id = in.add_code_watcher(on_code_event);
    const auto interp = reinterpret_cast<std::uintptr_t>(in.interpreter_get());
    in.err_restore(type, value, traceback); // (and the error of a full watcher table is dropped)
    if (id >= 0) {
        g_code_watch.interp.store(interp, std::memory_order_relaxed);
        g_code_watch.state.store(Watch::watching, std::memory_order_release);
    } else {
        g_code_watch.state.store(Watch::failed, std::memory_order_relaxed);
    }
    return 0;
}

/// Asks the main thread, once for each start of the interpreter, to add the watcher.
void ask_for_watcher(const Interpreter& in) noexcept {
    Watch expected = Watch::unasked;
    if (!g_code_watch.state.compare_exchange_strong(expected, Watch::asked, std::memory_order_relaxed))
        return;
    const bool slot = in.fixed == 11;
    if (in.add_pending_call == nullptr ||
        (!slot && (in.add_code_watcher == nullptr || in.interpreter_get == nullptr || in.err_fetch == nullptr ||
                   in.err_restore == nullptr || in.at_exit == nullptr))) {
        g_code_watch.state.store(Watch::failed, std::memory_order_relaxed);
        return;
    }
    if (in.add_pending_call(slot ? count_code_deallocs : add_watcher, nullptr) != 0)
        g_code_watch.state.store(
            g_code_watch.tries.fetch_add(1, std::memory_order_relaxed) < kWatcherTries ? Watch::unasked : Watch::failed,
            std::memory_order_relaxed);
}

/// The count of destroyed code objects, when the watcher counts those of the interpreter of the
/// thread state `ts`; else kNoEpoch. `may_ask`: not inside another capture (a signal handler's).
inline std::uint64_t code_epoch(const Interpreter& in, std::uintptr_t ts, bool may_ask) noexcept {
    const Watch w = g_code_watch.state.load(std::memory_order_acquire);
    if (__builtin_expect(w == Watch::watching, 1)) {
        if (in.fixed == 11) {
            // Counted while PyCode_Type's slot holds ours (a later wrapper may not call it).
            if (load_ptr(in.code_type + kTypeDealloc) == reinterpret_cast<std::uintptr_t>(&counting_code_dealloc))
                return g_code_watch.destroyed.load(std::memory_order_relaxed);
            return kNoEpoch;
        }
        if (load_ptr(ts + in.layout.ts_interp) == g_code_watch.interp.load(std::memory_order_relaxed))
            return g_code_watch.destroyed.load(std::memory_order_relaxed);
        return kNoEpoch;
    }
    if (w == Watch::unasked && may_ask && in.fixed >= 11)
        ask_for_watcher(in);
    return kNoEpoch;
}

// ---- code objects ----------------------------------------------------------------------------

/// What identifies a code object's contents well enough that an address reused by another code
/// object cannot give the first one's names: the object's address, its name and line-table
/// objects, its first line, and the size and first bytes of its line table.
struct CodeKey {
    std::uintptr_t code, filename, qualname, linetable;
    std::uint64_t table_head, table_tail; ///< the line table's first and last 8 bytes
    std::uint64_t name_head;              ///< the qualified name's length and first 7 characters
    std::int64_t table_size;
    int first_line;
    bool operator==(const CodeKey& o) const {
        return code == o.code && filename == o.filename && qualname == o.qualname && linetable == o.linetable &&
               table_head == o.table_head && table_tail == o.table_tail && name_head == o.name_head &&
               table_size == o.table_size && first_line == o.first_line;
    }
};
struct CodeKeyHash {
    std::size_t operator()(const CodeKey& k) const noexcept {
        std::uint64_t h = k.code * 0x9e3779b97f4a7c15ull;
        h ^= (k.linetable + k.table_head + static_cast<std::uint64_t>(k.first_line)) * 0xc2b2ae3d27d4eb4full;
        return static_cast<std::size_t>(h ^ (h >> 29));
    }
};

struct CodeInfo {
    std::string file;
    std::string function;
    std::vector<unsigned char> table;
    int first_line = 0;
};

/// Process-wide, append-only: an index once given always names the same code object.
struct CodeTable {
    std::mutex mutex;
    std::unordered_map<CodeKey, std::uint32_t, CodeKeyHash> index;
    std::vector<CodeInfo> codes;
};
CodeTable& table() {
    static auto* t = new CodeTable(); // leaked: reports may be written during static destruction
    return *t;
}

// ---- the fast index: (code address, identity) -> code table index ---------------------------
// Shared by all threads, read without a lock (a slot's fields are written before its code address,
// with release; readers load the address with acquire). Identity: in 3.12+ the code object's
// version (co_version: each new code object takes the next value of a counter that only goes up,
// so a code object made at a freed one's address has another version); in 3.11, and once the
// counter ran out (version 0), a 64-bit hash of the whole CodeKey. Slots are never removed: an
// old code object's slot simply no longer matches.

struct FastSlot {
    std::atomic<std::uint64_t> code{0};
    std::atomic<std::uint64_t> aux{0};
    std::atomic<std::uint64_t> rest{0}; ///< version << 32 | index
};
struct FastTable {
    std::size_t mask = 0;
    std::size_t used = 0; ///< under the code table's mutex
    FastSlot* slots = nullptr;
};
std::atomic<FastTable*> g_fast{nullptr};
constexpr int kFastProbe = 32;
constexpr std::size_t kFastInitial = std::size_t{1} << 12;
constexpr std::size_t kFastMax = std::size_t{1} << 24;

inline std::size_t fast_slot(std::uint64_t code, std::uint64_t aux, std::size_t mask) noexcept {
    return static_cast<std::size_t>(((code ^ (aux * 0xc2b2ae3d27d4eb4full)) * 0x9e3779b97f4a7c15ull) >> 35) & mask;
}

std::uint64_t key_hash(const CodeKey& k) noexcept {
    std::uint64_t h = 0x6a09e667f3bcc909ull;
    for (std::uint64_t w : {k.filename, k.qualname, k.linetable, k.table_head, k.table_tail, k.name_head,
                            static_cast<std::uint64_t>(k.table_size),
                            static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.first_line))}) {
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 31;
    }
    return h | 1; // never 0
}

/// Under the code table's mutex.
void fast_insert(std::uint64_t code, std::uint64_t aux, std::uint32_t version, std::uint32_t index) noexcept {
    FastTable* t = g_fast.load(std::memory_order_relaxed);
    if (t == nullptr || (t->used + 1) * 2 > t->mask + 1) {
        const std::size_t size = t == nullptr ? kFastInitial : (t->mask + 1) * 2;
        if (size > kFastMax)
            return; // not indexed: later captures of it take the slow path
        auto* n = new (std::nothrow) FastTable;
        if (n == nullptr)
            return;
        n->slots = new (std::nothrow) FastSlot[size];
        if (n->slots == nullptr) {
            delete n;
            return;
        }
        n->mask = size - 1;
        if (t != nullptr) {
            for (std::size_t i = 0; i <= t->mask; ++i) {
                const std::uint64_t c = t->slots[i].code.load(std::memory_order_relaxed);
                if (c == 0)
                    continue;
                const std::uint64_t x = t->slots[i].aux.load(std::memory_order_relaxed);
                std::size_t j = fast_slot(c, x, n->mask);
                while (n->slots[j].code.load(std::memory_order_relaxed) != 0)
                    j = (j + 1) & n->mask;
                n->slots[j].aux.store(x, std::memory_order_relaxed);
                n->slots[j].rest.store(t->slots[i].rest.load(std::memory_order_relaxed), std::memory_order_relaxed);
                n->slots[j].code.store(c, std::memory_order_relaxed);
                ++n->used;
            }
        }
        g_fast.store(n, std::memory_order_release); // the old table stays: readers may be in it
        t = n;
    }
    std::size_t i = fast_slot(code, aux, t->mask);
    for (int probe = 0; probe < kFastProbe; ++probe, i = (i + 1) & t->mask) {
        const std::uint64_t c = t->slots[i].code.load(std::memory_order_relaxed);
        if (c == code && t->slots[i].aux.load(std::memory_order_relaxed) == aux &&
            (t->slots[i].rest.load(std::memory_order_relaxed) >> 32) == version)
            return;
        if (c != 0)
            continue;
        t->slots[i].aux.store(aux, std::memory_order_relaxed);
        t->slots[i].rest.store((static_cast<std::uint64_t>(version) << 32) | index, std::memory_order_relaxed);
        t->slots[i].code.store(code, std::memory_order_release);
        ++t->used;
        return;
    }
}

/// A compact str object as UTF-8 (code names and file names always are compact).
std::string read_str(const Interpreter& in, std::uintptr_t obj) {
    const Layout& l = in.layout;
    if (obj == 0 || load_ptr(obj + l.ob_type) != in.unicode_type)
        return "?";
    const auto state = load<std::uint32_t>(obj + l.str_state);
    const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    auto length = load<std::int64_t>(obj + l.str_length);
    if (!compact || length < 0 || (kind != 1 && kind != 2 && kind != 4))
        return "?";
    if (length > 4096)
        length = 4096;
    const std::uintptr_t data = obj + (ascii ? l.str_ascii_size : l.str_compact_size);
    std::string out;
    out.reserve(static_cast<std::size_t>(length));
    for (std::int64_t i = 0; i < length; ++i) {
        std::uint32_t c = kind == 1   ? load<std::uint8_t>(data + i)
                          : kind == 2 ? load<std::uint16_t>(data + 2 * i)
                                      : load<std::uint32_t>(data + 4 * i);
        if (c < 0x80) {
            out += static_cast<char>(c);
        } else if (c < 0x800) {
            out += static_cast<char>(0xc0 | (c >> 6));
            out += static_cast<char>(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            out += static_cast<char>(0xe0 | (c >> 12));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (c & 0x3f));
        } else {
            out += static_cast<char>(0xf0 | (c >> 18));
            out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (c & 0x3f));
        }
    }
    return out;
}

/// The key of a code object, or false when its line table is not a bytes object.
bool code_key(const Interpreter& in, std::uintptr_t code, CodeKey* k) noexcept {
    const Layout& l = in.layout;
    k->code = code;
    k->filename = load_ptr(code + l.co_filename);
    k->qualname = load_ptr(code + l.co_qualname);
    k->linetable = load_ptr(code + l.co_linetable);
    k->first_line = load<int>(code + l.co_firstlineno);
    if (k->linetable == 0 || load_ptr(k->linetable + l.ob_type) != in.bytes_type)
        return false;
    k->table_size = load<std::int64_t>(k->linetable + l.bytes_size);
    std::uint64_t head = 0, tail = 0;
    if (k->table_size > 0) {
        const std::size_t n = static_cast<std::size_t>(k->table_size < 8 ? k->table_size : 8);
        std::memcpy(&head, reinterpret_cast<const void*>(k->linetable + l.bytes_sval), n);
        std::memcpy(&tail, reinterpret_cast<const void*>(k->linetable + l.bytes_sval + k->table_size - n), n);
    }
    k->table_head = head;
    k->table_tail = tail;
    // The name itself, not only its object's address: a code object made where a freed one was
    // may get its name object where the old name was, too.
    std::uint64_t name = 0;
    if (k->qualname != 0 && load_ptr(k->qualname + l.ob_type) == in.unicode_type) {
        const auto state = load<std::uint32_t>(k->qualname + l.str_state);
        const auto length = load<std::int64_t>(k->qualname + l.str_length);
        if ((state & (1u << 5)) != 0 && (state & (1u << 6)) != 0 && length >= 0) { // compact ASCII
            const std::size_t n = static_cast<std::size_t>(length < 7 ? length : 7);
            std::memcpy(&name, reinterpret_cast<const void*>(k->qualname + l.str_ascii_size), n);
            name = (name << 8) | static_cast<std::uint64_t>(length & 0xff);
        }
    }
    k->name_head = name;
    return true;
}

/// A frame's instruction offset in code units from its instruction pointer and the address of its
/// code object's first instruction. Before its first instruction a frame points one unit before
/// the code: offset 0.
inline std::uintptr_t instr_offset(std::uintptr_t instr, std::uintptr_t first) noexcept {
    return instr >= first ? ((instr - first) >> 1) & 0xffffffffu : 0;
}

/// Frames (shims included) a thread's shadow remembers of its previous walk.
constexpr int kWalkSteps = 2 * kMaxPythonFrames;

/// One frame of the previous walk, as it was read: its address, and for a Python frame its code
/// object, that object's version, its instruction pointer and the word the walk wrote for it
/// (without the entry tag, which comes from the next step). The eval loop's entry shim has word 0
/// (a Python frame's word has kPythonTag) and nothing else read. On 3.11 `code` and `version`
/// are the frame's function object and its func_version, and the word carries the entry tag.
struct WalkStep {
    std::uintptr_t frame = 0;
    std::uintptr_t code = 0;
    std::uintptr_t instr = 0;
    std::uintptr_t word = 0;
    std::uint32_t version = 0;
};

/// How the previous walk ended after its last step.
enum class WalkEnd : std::uint32_t {
    none,      ///< nothing to compare with
    chain_end, ///< the next frame was null
    at_max,    ///< it had written the most frames it was asked for
    cut,       ///< the shadow had no room for more steps: a new walk goes on from there
};

/// Per thread: the code objects met at each depth by the previous capture (3.12+), so that a
/// repeated stack finds each frame's index by comparing with what it met there last time; and
/// that capture's walk, step by step, for the pass that compares instead of walking.
struct Shadow {
    struct Entry {
        std::uintptr_t code = 0;
        std::uint64_t version_index = 0; ///< version | index << 32 (version 0: no entry)
    } at[kMaxPythonFrames];
    WalkStep steps[kWalkSteps + 1];
    int steps_n = 0;
    int max = 0; ///< the walk's frame limit
    WalkEnd end = WalkEnd::none;
    /// The count of destroyed code objects when every step was last compared or recorded
    /// (kNoEpoch: not known, or the record may be torn by a capture inside another).
    std::uint64_t epoch = kNoEpoch;
};
Shadow g_no_shadow; // read (never written) by a thread whose shadow could not be allocated
Shadow* thread_shadow() noexcept {
    return util::PerThread<Shadow>::get();
}
void forget_epoch() noexcept {
    if (Shadow* s = thread_shadow())
        s->epoch = kNoEpoch;
}

/// What tells this code object from another one at the same address: (aux, version) as the fast
/// index keys it. False when it is not readable as a code object.
inline bool code_identity(const Interpreter& in, std::uintptr_t code, std::uint64_t* aux,
                          std::uint32_t* version) noexcept {
    const Layout& l = in.layout;
    if (l.co_version != kNone) {
        const auto v = load<std::uint32_t>(code + l.co_version);
        if (v != 0) {
            *aux = 0; // the address and the version say it all
            *version = v;
            return true;
        }
    }
    CodeKey k;
    if (!code_key(in, code, &k))
        return false;
    *aux = key_hash(k);
    *version = 0;
    return true;
}

/// The code table index of a code object met for the first time (or not in the fast index):
/// copies its names and line table once, under the table's lock.
std::size_t code_index_slow(const Interpreter& in, std::uintptr_t code, std::uint64_t aux,
                            std::uint32_t version) noexcept {
    CodeKey key;
    if (!code_key(in, code, &key))
        return kNone;
    std::uint32_t index = 0;
    try {
        CodeTable& t = table();
        std::lock_guard<std::mutex> lock(t.mutex);
        auto it = t.index.find(key);
        if (it != t.index.end()) {
            index = it->second;
        } else {
            if (t.codes.size() >= (std::size_t{1} << 30))
                return kNone;
            CodeInfo info;
            info.file = read_str(in, key.filename);
            info.function = read_str(in, key.qualname);
            info.first_line = key.first_line;
            const std::size_t n = static_cast<std::size_t>(key.table_size > (1 << 20) ? (1 << 20) : key.table_size);
            info.table.resize(n);
            if (n > 0)
                std::memcpy(info.table.data(), reinterpret_cast<const void*>(key.linetable + in.layout.bytes_sval), n);
            index = static_cast<std::uint32_t>(t.codes.size());
            t.codes.push_back(std::move(info));
            t.index.emplace(key, index);
        }
        fast_insert(code, aux, version, index);
    } catch (...) {
        return kNone;
    }
    return index;
}

/// The code table index of a code object whose key was read already (3.11).
std::size_t code_index_of_key(const Interpreter& in, const FastTable* fast, const CodeKey& key) noexcept {
    const std::uint64_t aux = key_hash(key);
    if (fast != nullptr) {
        std::size_t i = fast_slot(key.code, aux, fast->mask);
        for (int probe = 0; probe < kFastProbe; ++probe, i = (i + 1) & fast->mask) {
            const std::uint64_t c = fast->slots[i].code.load(std::memory_order_acquire);
            if (c == 0)
                break;
            if (c != key.code || fast->slots[i].aux.load(std::memory_order_relaxed) != aux)
                continue;
            const std::uint64_t rest = fast->slots[i].rest.load(std::memory_order_relaxed);
            if ((rest >> 32) == 0)
                return static_cast<std::size_t>(rest & 0xffffffffu);
        }
    }
    return code_index_slow(in, key.code, aux, 0);
}

/// The code table index of a code object: one lookup in the shared fast index when it was met
/// before (by any thread).
inline std::size_t code_index(const Interpreter& in, const FastTable* fast, std::uintptr_t code) noexcept {
    std::uint64_t aux = 0;
    std::uint32_t version = 0;
    if (!code_identity(in, code, &aux, &version))
        return kNone;
    if (fast != nullptr) {
        std::size_t i = fast_slot(code, aux, fast->mask);
        for (int probe = 0; probe < kFastProbe; ++probe, i = (i + 1) & fast->mask) {
            const std::uint64_t c = fast->slots[i].code.load(std::memory_order_acquire);
            if (c == 0)
                break;
            if (c != code || fast->slots[i].aux.load(std::memory_order_relaxed) != aux)
                continue;
            const std::uint64_t rest = fast->slots[i].rest.load(std::memory_order_relaxed);
            if ((rest >> 32) == version)
                return static_cast<std::size_t>(rest & 0xffffffffu);
        }
    }
    return code_index_slow(in, code, aux, version);
}

/// The current frame of the Python thread state `ts` (null when there is none).
std::uintptr_t current_frame(const Interpreter& in, std::uintptr_t ts) noexcept {
    if (ts == 0)
        return 0;
    const Layout& l = in.layout;
    if (l.ts_current_frame != kNone)
        return load_ptr(ts + l.ts_current_frame);
    const std::uintptr_t cframe = load_ptr(ts + l.ts_cframe);
    return cframe != 0 ? load_ptr(cframe + l.cframe_current_frame) : 0;
}

} // namespace

void set_enabled(bool on) noexcept {
    g_enabled.store(on, std::memory_order_relaxed);
    if (!on) {
        State expected = State::unknown;
        g_state.compare_exchange_strong(expected, State::disabled);
    }
}

void set_code_watcher(bool on) noexcept {
    Watch expected = on ? Watch::off : Watch::unasked;
    g_code_watch.state.compare_exchange_strong(expected, on ? Watch::unasked : Watch::off);
}

void set_warning_sink(void (*sink)(const char*)) noexcept {
    g_sink.store(sink ? sink : stderr_sink);
}

State state() noexcept {
    return g_state.load(std::memory_order_acquire);
}

std::string version() {
    return g_state.load(std::memory_order_acquire) == State::ready ? g_interp.version : std::string();
}

namespace {

/// What a walk with the shadow tells capture() about its result.
struct WalkOutcome {
    bool unchanged = false; ///< the record's words, every one as it was (the compare pass reached its end)
    bool recorded = false;  ///< the shadow's record now holds exactly the words written
    bool partial = false;   ///< the record keeps steps past the last one compared (`max` words reached)
    bool trusted = false;   ///< the compare pass trusted the record's epoch
    int compared = 0;       ///< words the compare pass wrote (the rest were walked)
};

/// What the thread's latest capture wrote: words of none of the kinds below, no frames read at
/// all, or exactly the words the shadow's record holds.
enum class Latest : std::uint8_t { other, none, record };

/// Per thread: capture()'s serial (see python_frames.hpp), what the latest capture wrote, and the
/// marks that keep a capture made by a signal handler, inside another, from being taken for a
/// repeat.
struct CallState {
    std::uint64_t serial = 0;
    Latest latest = Latest::other;
    bool busy = false;
    bool disturbed = false;
};
thread_local CallState tl_call __attribute__((tls_model("initial-exec")));

/// The same code object at another instruction (another line of the same function, as the
/// innermost frame often is): the step keeps its code index and takes the new offset.
inline void take_instruction(WalkStep& s, std::uintptr_t instr, std::uintptr_t first, bool& updated) noexcept {
    s.instr = instr;
    s.word = (s.word & ~std::uintptr_t{0xffffffffu}) | instr_offset(instr, first);
    updated = true;
}

/// The pass over a repeated stack (3.11+; 3.11 by function versions, Fixed311): the frames of this thread's previous
/// walk, compared step by step with what is there now. While they match, a frame's word is the one written then, and
/// the next frame is the address remembered, which equals the one just read: the processor then starts the next frame's
/// reads without waiting for that read (a predicted branch, not a chain of loads each waiting for the one before).
/// It starts at step `from` with `n` words written (0 and 0, unless after compare_and_merge's move).
/// `Trusted`: no code object was destroyed since every step was compared or recorded (the
/// shadow's epoch), so a frame with the step's instruction pointer runs the step's code object,
/// and neither is read.
/// Returns the step where the stacks differ
/// (`frame` and `n` are then that step's frame and the words written before it), or -1 when the
/// previous walk's end was reached (the walk is complete in `out`, `n` words).
template <typename F, bool Trusted>
int compare_walk(Shadow& sh, int from, std::uintptr_t& frame, std::uintptr_t* out, int& n, bool& updated) noexcept {
    WalkStep* st = sh.steps;
    // At most `max` words in all (a step writes at most one): `out` is never written past `max`,
    // even from a record a signal handler's capture wrote over meanwhile.
    const int recorded = sh.steps_n;
    const int steps = recorded < from + (sh.max - n) ? recorded : from + (sh.max - n);
    int k = from;
    int words = n;
    std::uintptr_t f = frame;
    if (k >= steps || f != st[k].frame)
        return k;
    for (; k < steps; ++k) {
        WalkStep& s = st[k];
        const std::uintptr_t previous = load_ptr(f + F::previous);
        const std::uintptr_t word = s.word; // 0 for a shim, a tagged word for a Python frame
        if constexpr (F::function_versions) {
            // 3.11: the step's code object is its function's code (the walk records no other
            // step), so the same function object with the same version runs it still; the
            // version is read only from the live frame's function.
            const std::uintptr_t instr = load_ptr(f + F::instr);
            const std::uintptr_t other_entry = load<std::uint8_t>(f + F::is_entry) ^ ((word >> 62) & 1);
            // Trusted: the instruction pointer alone tells the code object (as below); the
            // function is read only where it moved.
            if (!Trusted || __builtin_expect(((instr ^ s.instr) | other_entry) != 0, 0)) {
                const std::uintptr_t func = load_ptr(f + F::func);
                if (((func ^ s.code) | other_entry) != 0 || load<std::uint32_t>(func + F::func_version) != s.version)
                    break;
                if (__builtin_expect(instr != s.instr, 0))
                    take_instruction(s, instr, frame_code<F>(f) + F::co_code, updated);
            }
            out[words++] = s.word;
        } else if (__builtin_expect(word == 0, 0)) {
            // Where a shim was, a shim is: shims live on this thread's C stack, other frames on
            // the heap.
            if (words > 0)
                out[words - 1] |= kEntryTag;
        } else if constexpr (Trusted) {
            const std::uintptr_t instr = load_ptr(f + F::instr);
            if (__builtin_expect(instr != s.instr, 0)) {
                const std::uintptr_t code = frame_code<F>(f);
                if (((code ^ s.code) | (load<std::uint32_t>(code + F::version) ^ s.version)) != 0)
                    break;
                take_instruction(s, instr, code + F::co_code, updated);
            }
            out[words++] = s.word;
        } else {
            const std::uintptr_t code = frame_code<F>(f);
            const std::uintptr_t instr = load_ptr(f + F::instr);
            // The code object and its version (a fresh object at a freed one's address has
            // another), and the instruction: together they give the same word. One test for the
            // three; what differs is sorted out below.
            if (__builtin_expect(
                    ((code ^ s.code) | (instr ^ s.instr) | (load<std::uint32_t>(code + F::version) ^ s.version)) != 0,
                    0)) {
                if (((code ^ s.code) | (load<std::uint32_t>(code + F::version) ^ s.version)) != 0)
                    break;
                take_instruction(s, instr, code + F::co_code, updated);
            }
            // (No type check, unlike the walk: the step was a code object when it was recorded,
            // and what a live 3.13 frame points to is a code object or None, which is static:
            // never at a heap address where a code object was.)
            out[words++] = s.word;
        }
        std::uintptr_t next = st[k + 1].frame;
        if (__builtin_expect(previous != next, 0)) {
            // Another frame from here on: the walk goes on from it.
            frame = previous;
            n = words;
            return k + 1;
        }
        asm("" : "+r"(next)); // the remembered address, not the value read (which it equals)
        f = next;
    }
    frame = f;
    n = words;
    if (k < recorded)
        return k; // step k differs (or the `max` steps were compared)
    if (sh.end == WalkEnd::chain_end || (sh.end == WalkEnd::at_max && words == sh.max))
        return -1; // (chain_end: f is null, as the sentinel step says)
    return k;      // cut: walk on from here
}

/// How far compare_and_merge reads new frames looking for the record again, and how many times
/// it moves the record's outer part in one capture.
constexpr int kMergeAhead = 16;
constexpr int kMergeRounds = 8;

/// 3.11 (no code versions): a code object is known by its whole CodeKey. Each thread remembers the
/// key met at each depth by its previous capture, so a repeated stack compares the fields instead
/// of hashing them and looking the hash up.
struct Shadow311 {
    struct Entry {
        CodeKey key{};
        std::uint32_t index = 0;
        bool valid = false;
    } at[kMaxPythonFrames];
};
Shadow311* thread_shadow311() noexcept {
    return util::PerThread<Shadow311>::get();
}

/// 3.11: the code table index of the code object with `key`, met at depth n: the one the thread's
/// previous capture met there when the key is the same, else looked up (kNone: not readable).
std::size_t index_311(const Interpreter& in, const FastTable* fast, Shadow311* shadow, int n,
                      const CodeKey& key) noexcept {
    if (shadow != nullptr && shadow->at[n].valid && shadow->at[n].key == key)
        return shadow->at[n].index;
    const std::size_t index = code_index_of_key(in, fast, key);
    if (index != kNone && shadow != nullptr) {
        shadow->at[n].key = key;
        shadow->at[n].index = static_cast<std::uint32_t>(index);
        shadow->at[n].valid = true;
    }
    return index;
}

/// How the walk reads one frame: the shim an eval-loop call pushes below its first frame (3.12+);
/// a Python frame, its step (word, code object or 3.11 function, version) made; the same, but one
/// a later compare could not tell from another object at its address (3.12+: code version 0;
/// 3.11: a function without a version, or not running its own code), so it is not recorded; or
/// one skipped (no code object, or none the code table can read).
enum class FrameRead { shim, python, unrecordable, skipped };

/// 3.12+: the code object met at depth n by the thread's previous capture (`at`; kept there when
/// `keep`), same version, gives the index without a lookup. Version 0 is never stored.
template <typename F>
inline FrameRead read_frame_versioned(const Interpreter& in, const FastTable* fast, Shadow::Entry* at, bool keep, int n,
                                      std::uintptr_t frame, WalkStep* s) noexcept {
    if (__builtin_expect(load<char>(frame + F::owner) >= kShimOwner, 0)) {
        *s = WalkStep{frame, 0, 0, 0, 0};
        return FrameRead::shim;
    }
    const std::uintptr_t code = frame_code<F>(frame);
    if (__builtin_expect(code == 0, 0) || (F::check_type && load_ptr(code + in.layout.ob_type) != in.code_type))
        return FrameRead::skipped;
    const std::uint64_t version = load<std::uint32_t>(code + F::version);
    std::uint64_t vi = at[n].version_index;
    if (__builtin_expect(at[n].code != code || static_cast<std::uint32_t>(vi) != version, 0)) {
        const std::size_t i = code_index(in, fast, code);
        if (i == kNone)
            return FrameRead::skipped;
        vi = version | (static_cast<std::uint64_t>(i) << 32);
        if (keep && version != 0) {
            at[n].code = code;
            at[n].version_index = vi;
        }
    }
    const std::uintptr_t instr = load_ptr(frame + F::instr);
    *s =
        WalkStep{frame, code, instr, kPythonTag | (vi & 0xffffffff00000000ull) | instr_offset(instr, code + F::co_code),
                 static_cast<std::uint32_t>(version)};
    return version != 0 ? FrameRead::python : FrameRead::unrecordable;
}

/// 3.11: a code object known by its CodeKey (index_311); recordable when its function has a
/// version and runs its own code (a frame started before its function's code was replaced runs
/// the old code: no version tells that one apart).
inline FrameRead read_frame_311(const Interpreter& in, const FastTable* fast, Shadow311* shadow, int n,
                                std::uintptr_t frame, WalkStep* s) noexcept {
    using F = Fixed311;
    const std::uintptr_t code = load_ptr(frame + F::code);
    CodeKey key;
    if (code == 0 || !code_key(in, code, &key))
        return FrameRead::skipped;
    const std::size_t index = index_311(in, fast, shadow, n, key);
    if (index == kNone)
        return FrameRead::skipped;
    const std::uintptr_t instr = load_ptr(frame + F::instr);
    std::uintptr_t w = kPythonTag | (static_cast<std::uintptr_t>(index) << 32) | instr_offset(instr, code + F::co_code);
    if (load<bool>(frame + F::is_entry))
        w |= kEntryTag;
    const std::uintptr_t func = load_ptr(frame + F::func);
    const std::uint32_t version = func != 0 ? load<std::uint32_t>(func + F::func_version) : 0;
    *s = WalkStep{frame, func, instr, w, version};
    return version == 0 || load_ptr(func + F::func_code) != code ? FrameRead::unrecordable : FrameRead::python;
}

/// One frame as the walk reads it: 3.12+ by its code object and version (the one `shadow` met at
/// depth n takes its index without a lookup), 3.11 by its CodeKey (`shadow311`, index_311).
template <typename F>
inline FrameRead read_frame(const Interpreter& in, const FastTable* fast, Shadow* shadow, Shadow311* shadow311, int n,
                            std::uintptr_t frame, WalkStep* s) noexcept {
    if constexpr (F::function_versions)
        return read_frame_311(in, fast, shadow311, n, frame, s);
    else
        return read_frame_versioned<F>(in, fast, shadow != nullptr ? shadow->at : g_no_shadow.at, shadow != nullptr, n,
                                       frame, s);
}

/// A frame read as the walk reads it, for compare_and_merge: false for one the walk would skip or
/// not record, left for the walk itself.
template <typename F>
bool read_new_frame(const Interpreter& in, const FastTable* fast, Shadow& sh, std::uintptr_t frame, std::uintptr_t* out,
                    int& n, WalkStep* s) noexcept {
    const FrameRead r = read_frame<F>(in, fast, &sh, F::function_versions ? thread_shadow311() : nullptr, n, frame, s);
    if (r == FrameRead::shim) {
        if (n > 0)
            out[n - 1] |= kEntryTag; // the frame before a shim is an entry
        return true;
    }
    if (r != FrameRead::python)
        return false;
    out[n++] = s->word;
    return true;
}

/// The compare pass, and where it stops, a merge with the record further out: the frames
/// from there are read as the walk reads them until one is at the address of a step further on in
/// the record; the record's steps from that one on are moved to follow the frames read, and the
/// compare pass goes on from there. One framework operator after another (HF `generate`) differs in
/// its inner Python frames and shares the outer ones, at the same addresses. Sound as the pass
/// itself: a step is used only once the live frame at its address has its code, version and
/// instruction, and an address is followed only once the link read equals it.
/// Returns -1 when the stack is complete in `out` (`n` words), else the step the walk records from
/// (`frame` and `n`: where it goes on); `compared`: the words the compare pass wrote.
template <typename F, bool Trusted>
int compare_and_merge(const Interpreter& in, const FastTable* fast, Shadow& sh, std::uintptr_t& frame,
                      std::uintptr_t* out, int& n, bool& updated, int* compared) noexcept {
    int k = compare_walk<F, Trusted>(sh, 0, frame, out, n, updated);
    *compared = n;
    WalkStep* st = sh.steps;
    for (int round = 0; round < kMergeRounds && k >= 0 && k + kMergeAhead <= kWalkSteps; ++round) {
        WalkStep read[kMergeAhead];
        int t = 0;
        int from = k; // the record's steps from here may be met again
        int j = -1;
        const int last = sh.steps_n;
        while (frame != 0 && t < kMergeAhead && n < sh.max) {
            for (int c = from; c < last && c < from + kMergeAhead; ++c) {
                if (st[c].frame == frame) {
                    j = c;
                    break;
                }
            }
            if (j >= 0 && (j > k || t > 0))
                break; // met the record again at step j
            // (j == k and nothing read: the very step the pass stopped at, another code object)
            const std::uintptr_t previous = load_ptr(frame + F::previous);
            if (!read_new_frame<F>(in, fast, sh, frame, out, n, &read[t])) {
                j = -1;
                break; // the walk reads this one
            }
            ++t;
            if (j >= 0)
                from = j + 1; // that step of the record is this frame no more
            j = -1;
            frame = previous;
        }
        if (j < 0 || k + t + (last - j) + 1 > kWalkSteps + 1) {
            // Not met again: what was read becomes the record's, and the walk goes on.
            for (int i = 0; i < t; ++i)
                st[k + i] = read[i];
            return k + t;
        }
        // The record's steps j .. last (with the frame after its last) follow the frames read.
        std::memmove(static_cast<void*>(&st[k + t]), &st[j], static_cast<std::size_t>(last - j + 1) * sizeof *st);
        for (int i = 0; i < t; ++i)
            st[k + i] = read[i];
        sh.steps_n = k + t + (last - j);
        updated = true;
        const int before = n;
        k = compare_walk<F, Trusted>(sh, k + t, frame, out, n, updated);
        *compared += n - before;
    }
    return k;
}

/// The compare pass, and the start of a new record when it does not give the whole result: -1
/// when it does (`n` words in `out`), else the step the walk records from (`frame` and `n` are
/// where it goes on). `epoch`: the count of destroyed code objects now (kNoEpoch when not
/// known or not to be trusted).
template <typename F>
int compare_then_record(const Interpreter& in, const FastTable* fast, Shadow* shadow, std::uintptr_t& frame,
                        std::uintptr_t* out, int& n, int max, std::uint64_t epoch, WalkOutcome* outcome) noexcept {
    if (shadow == nullptr)
        return 0;
    int step = 0;
    if (shadow->end != WalkEnd::none && shadow->max == max) {
        bool updated = false;
        const bool trusted = epoch != kNoEpoch && shadow->epoch == epoch;
        outcome->trusted = trusted;
        step = trusted ? compare_and_merge<F, true>(in, fast, *shadow, frame, out, n, updated, &outcome->compared)
                       : compare_and_merge<F, false>(in, fast, *shadow, frame, out, n, updated, &outcome->compared);
        if (step < 0) {
            outcome->unchanged = !updated;
            outcome->recorded = true;
            return -1; // the previous walk, entire
        }
        if (n >= max) {
            outcome->partial = true;
            return -1; // as many frames as asked for
        }
    }
    // From `step` on, this walk is recorded (the steps before it are the previous walk's).
    shadow->end = WalkEnd::none;
    shadow->max = max;
    return step;
}

/// A walk's record of its steps, for the next capture's compare pass.
struct StepLog {
    Shadow* shadow;
    int step;
    bool recording;
    WalkOutcome* outcome;
    /// The record ends after `step` steps: `next` is the frame after them, as a later compare
    /// meets it (0 at the chain's end), and `end` says how a compare that gets there goes on.
    void finish(WalkEnd end, std::uintptr_t next) noexcept {
        if (recording) {
            shadow->steps[step].frame = next;
            shadow->steps_n = step;
            shadow->end = end;
            recording = false;
            outcome->recorded = end == WalkEnd::chain_end || end == WalkEnd::at_max;
        }
    }
    /// A step remembered: while the walk stays recordable (a frame it skips is not: a later
    /// compare could not tell it from the same address holding a readable frame).
    void record(const WalkStep& s) noexcept {
        if (step >= kWalkSteps)
            finish(WalkEnd::cut, s.frame);
        else if (recording)
            shadow->steps[step++] = s;
    }
};

/// The walk for the interpreters of the fixed layouts. It first compares the stack with the
/// thread's previous walk (compare_and_merge), then walks from where they differ, and remembers
/// what it meets for the next capture. 3.12+ knows a code object by its address and version (the
/// one the previous capture met at the same depth takes its index without a lookup); 3.11 by its
/// CodeKey, and records only the frames whose function has a version and runs its own code.
template <typename F>
int walk(const Interpreter& in, const FastTable* fast, Shadow* shadow, std::uintptr_t frame, std::uintptr_t* out,
         int max, std::uint64_t epoch, WalkOutcome* outcome) noexcept {
    if (max > kMaxPythonFrames)
        max = kMaxPythonFrames; // the shadow's size: no bound check per frame below
    int n = 0;
    const int step = compare_then_record<F>(in, fast, shadow, frame, out, n, max, epoch, outcome);
    if (step < 0)
        return n;
    StepLog log{shadow, step, shadow != nullptr, outcome};
    Shadow311* const shadow311 = F::function_versions ? thread_shadow311() : nullptr;
    int walked = 0;
    while (frame != 0 && ++walked < 100000) { // (only a cycle could reach the bound)
        const std::uintptr_t previous = load_ptr(frame + F::previous);
        WalkStep s;
        const FrameRead r = read_frame<F>(in, fast, shadow, shadow311, n, frame, &s);
        if (__builtin_expect(r == FrameRead::shim, 0)) {
            // The shim an eval-loop call pushes below its first frame: that frame is an entry.
            if (n > 0)
                out[n - 1] |= kEntryTag;
            log.record(s);
            frame = previous;
            continue;
        }
        if (__builtin_expect(r == FrameRead::skipped, 0)) {
            log.finish(WalkEnd::cut, frame);
            frame = previous;
            continue;
        }
        out[n] = s.word;
        if (r == FrameRead::unrecordable)
            log.finish(WalkEnd::cut, frame); // nothing tells this object from a later one at its address
        log.record(s);
        frame = previous;
        if (++n >= max) {
            log.finish(WalkEnd::at_max, previous);
            return n;
        }
    }
    log.finish(frame == 0 ? WalkEnd::chain_end : WalkEnd::none, 0);
    return n;
}

/// The walk with the offsets of the layout table (3.11, and 3.13 laid out unlike Fixed313).
int walk_general(const Interpreter& in, const FastTable* fast, std::uintptr_t frame, std::uintptr_t* out,
                 int max) noexcept {
    const Layout& l = in.layout;
    int n = 0;
    for (int steps = 0; frame != 0 && n < max && steps < 100000; ++steps) {
        const std::uintptr_t previous = load_ptr(frame + l.fr_previous);
        if (l.minor >= 12 && load<char>(frame + l.fr_owner) >= kShimOwner) {
            if (n > 0)
                out[n - 1] |= kEntryTag;
            frame = previous;
            continue;
        }
        const std::uintptr_t code = load_ptr(frame + l.fr_code) & ~std::uintptr_t{l.fr_code_tagged ? 3u : 0u};
        if (code == 0 || load_ptr(code + l.ob_type) != in.code_type) {
            frame = previous; // 3.13+: an executable that is not a code object
            continue;
        }
        const std::size_t index = code_index(in, fast, code);
        if (index != kNone) {
            const std::uintptr_t instr = load_ptr(frame + l.fr_instr);
            const std::uintptr_t first = code + l.co_code;
            std::uintptr_t offset = instr > first ? (instr - first) / 2 : 0;
            if (offset > 0xffffffffu)
                offset = 0;
            std::uintptr_t w = kPythonTag | (static_cast<std::uintptr_t>(index) << 32) | offset;
            if (l.fr_is_entry != kNone && load<bool>(frame + l.fr_is_entry))
                w |= kEntryTag;
            out[n++] = w;
        }
        frame = previous;
    }
    return n;
}

} // namespace

namespace {

/// The frames, as capture() writes them, and what the serial needs to know of them: `now` is
/// Latest::none when nothing was read, Latest::record when the shadow's record holds exactly the
/// words written, and `o` whether they are the record's, unchanged.
int read_frames(std::uintptr_t* out, int max, bool nested, WalkOutcome* o, Latest* now) noexcept {
    *now = Latest::none;
    State s = g_state.load(std::memory_order_acquire);
    if (s != State::ready) {
        if (s != State::unknown)
            return 0; // not Python, or a Python we cannot read: nothing more to pay
        if (discover() != State::ready)
            return 0;
    }
    const Interpreter& in = g_interp;
    if (out == nullptr || max <= 0 || in.is_initialized() == 0)
        return 0; // finalised
    const FastTable* fast = g_fast.load(std::memory_order_acquire);
    const auto ts = reinterpret_cast<std::uintptr_t>(in.this_thread_state());
    const std::uintptr_t frame = current_frame(in, ts);
    int n;
    if (in.fixed >= 11) {
        Shadow* shadow = thread_shadow();
        const std::uint64_t epoch = ts != 0 ? code_epoch(in, ts, !nested) : kNoEpoch;
        // A capture inside another (a signal handler's) may meet a step half written: it trusts
        // no epoch, and leaves none for the next capture (nor does the one it interrupted: capture).
        const std::uint64_t usable = nested ? kNoEpoch : epoch;
        n = in.fixed == 12   ? walk<Fixed312>(in, fast, shadow, frame, out, max, usable, o)
            : in.fixed == 13 ? walk<Fixed313>(in, fast, shadow, frame, out, max, usable, o)
            : in.fixed == 14 ? walk<Fixed314>(in, fast, shadow, frame, out, max, usable, o)
                             : walk<Fixed311>(in, fast, shadow, frame, out, max, usable, o);
        if (shadow != nullptr)
            shadow->epoch = o->partial ? kNoEpoch : usable;
    } else {
        n = walk_general(in, fast, frame, out, max);
    }
    *now = o->recorded ? Latest::record : Latest::other;
    return n;
}

} // namespace

int shim_addresses(std::uintptr_t* out, int max) noexcept {
    if (g_state.load(std::memory_order_acquire) != State::ready || out == nullptr)
        return 0;
    const Interpreter& in = g_interp;
    const Layout& l = in.layout;
    if (l.minor < 12 || in.is_initialized() == 0)
        return 0;
    std::uintptr_t frame = current_frame(in, reinterpret_cast<std::uintptr_t>(in.this_thread_state()));
    int n = 0;
    for (int steps = 0; frame != 0 && n < max && steps < 100000; ++steps) {
        if (load<char>(frame + l.fr_owner) >= kShimOwner)
            out[n++] = frame;
        frame = load_ptr(frame + l.fr_previous);
    }
    return n;
}

int capture(std::uintptr_t* out, int max, std::uint64_t* serial, int* compared, int* trusted) noexcept {
    CallState& t = tl_call;
    const bool nested = t.busy; // a signal handler's capture inside this thread's own
    t.busy = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    WalkOutcome o;
    Latest now;
    const int n = read_frames(out, max, nested, &o, &now);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    bool same = false;
    if (nested) {
        t.disturbed = true; // (busy stays: the interrupted capture still runs)
        t.latest = Latest::other;
    } else {
        if (t.disturbed)
            forget_epoch(); // the record may mix this capture's steps with the interrupting one's
        // The same words as the latest capture's: none read again, or the record unchanged.
        same = !t.disturbed && now == t.latest && (now == Latest::none || (now == Latest::record && o.unchanged));
        t.latest = t.disturbed ? Latest::other : now;
        t.disturbed = false;
        t.busy = false;
    }
    if (!same)
        ++t.serial;
    if (serial != nullptr)
        *serial = t.serial;
    if (compared != nullptr)
        *compared = o.compared;
    if (trusted != nullptr)
        *trusted = o.trusted ? o.compared : 0;
    return n;
}

int line_for_offset(const unsigned char* p, std::size_t size, int first_line, int offset) noexcept {
    const unsigned char* end = p + size;
    auto varint = [&](unsigned& v) {
        if (p >= end)
            return false;
        unsigned char b = *p++;
        v = b & 63;
        int shift = 6;
        while ((b & 64) != 0) {
            if (p >= end || shift > 28)
                return false;
            b = *p++;
            v |= static_cast<unsigned>(b & 63) << shift;
            shift += 6;
        }
        return true;
    };
    auto svarint = [&](int& v) {
        unsigned u = 0;
        if (!varint(u))
            return false;
        v = (u & 1) != 0 ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
        return true;
    };
    int line = first_line;
    int addr = 0;
    while (p < end) {
        const unsigned char head = *p++;
        if ((head & 0x80) == 0)
            return -1; // not the start of an entry: a table we do not understand
        const int code = (head >> 3) & 15;
        const int length = (head & 7) + 1;
        int delta = 0;
        bool no_line = false;
        unsigned skip = 0;
        if (code == 15) {
            no_line = true;
        } else if (code == 14) {
            if (!svarint(delta) || !varint(skip) || !varint(skip) || !varint(skip))
                return -1;
        } else if (code == 13) {
            if (!svarint(delta))
                return -1;
        } else if (code >= 10) {
            delta = code - 10;
            p += 2;
        } else {
            p += 1;
        }
        line += delta;
        if (offset < addr + length)
            return no_line ? -1 : line;
        addr += length;
    }
    return -1;
}

bool describe(std::uintptr_t word, FrameInfo* out) {
    if (!is_python_frame(word) || out == nullptr)
        return false;
    const std::size_t index = (word >> 32) & ((std::uintptr_t{1} << 30) - 1);
    const int offset = static_cast<int>(word & 0xffffffffu);
    CodeTable& t = table();
    std::lock_guard<std::mutex> lock(t.mutex);
    if (index >= t.codes.size())
        return false;
    const CodeInfo& c = t.codes[index];
    out->file = c.file;
    out->function = c.function;
    const int line = line_for_offset(c.table.data(), c.table.size(), c.first_line, offset);
    out->line = line > 0 ? line : 0;
    out->entry = is_entry_frame(word);
    return true;
}

std::vector<std::pair<std::string, std::size_t>> assumed_layout(int minor) {
    std::vector<std::pair<std::string, std::size_t>> v;
    // Bits of PyASCIIObject.state (interned:2, kind:3, compact:1, ascii:1) and the shim owner.
    v.emplace_back("str.kind_mask", 7u << 2);
    v.emplace_back("str.compact_bit", 1u << 5);
    v.emplace_back("str.ascii_bit", 1u << 6);
    if (minor == 11 || minor == 12) {
        const Layout l = minor == 11 ? layout_311() : layout_312();
        v.emplace_back("ts.cframe", l.ts_cframe);
        v.emplace_back("cframe.current_frame", l.cframe_current_frame);
        v.emplace_back("ts.interp", l.ts_interp);
        v.emplace_back("frame.code", l.fr_code);
        v.emplace_back("frame.previous", l.fr_previous);
        v.emplace_back("frame.instr", l.fr_instr);
        v.emplace_back("frame.owner", l.fr_owner);
        if (minor == 11) {
            v.emplace_back("frame.is_entry", l.fr_is_entry);
            v.emplace_back("frame.func", Fixed311::func);
            v.emplace_back("func.code", Fixed311::func_code);
            v.emplace_back("func.version", Fixed311::func_version);
            v.emplace_back("type.name", kTypeName);
            v.emplace_back("type.dealloc", kTypeDealloc);
            // (The compare pass's other 3.11 offsets are the layout table's, checked above.)
            static_assert(Fixed311::previous == 48 && Fixed311::code == 32 && Fixed311::instr == 56 &&
                          Fixed311::is_entry == 68 && Fixed311::co_code == 184);
        } else {
            v.emplace_back("owner.shim", static_cast<std::size_t>(kShimOwner));
            v.emplace_back("event.code_create", static_cast<std::size_t>(kCodeEventCreate));
        }
        v.emplace_back("code.filename", l.co_filename);
        v.emplace_back("code.qualname", l.co_qualname);
        v.emplace_back("code.linetable", l.co_linetable);
        v.emplace_back("code.firstlineno", l.co_firstlineno);
        v.emplace_back("code.code", l.co_code);
        if (minor == 12)
            v.emplace_back("code.version", l.co_version);
        v.emplace_back("object.type", l.ob_type);
        v.emplace_back("bytes.size", l.bytes_size);
        v.emplace_back("bytes.sval", l.bytes_sval);
        v.emplace_back("str.length", l.str_length);
        v.emplace_back("str.state", l.str_state);
        v.emplace_back("str.ascii_size", l.str_ascii_size);
        v.emplace_back("str.compact_size", l.str_compact_size);
    } else if (const DebugFields* d = debug_fields(minor)) {
        v.emplace_back("debug.version", d->version);
        v.emplace_back("debug.free_threaded", d->free_threaded);
#define GPUMEMPROF_FACT(field, name) v.emplace_back("debug." name, d->field);
        GPUMEMPROF_DEBUG_FIELDS(GPUMEMPROF_FACT)
#undef GPUMEMPROF_FACT
        v.emplace_back("str.compact_extra", 2 * sizeof(void*));
        v.emplace_back("code.version", 92);
        v.emplace_back("owner.shim", static_cast<std::size_t>(kShimOwner));
        if (minor >= 14)
            v.emplace_back("stackref.tag_bits", Fixed314::code_tags);
        v.emplace_back("event.code_create", static_cast<std::size_t>(kCodeEventCreate));
    }
    return v;
}

void lock_for_fork() noexcept {
    g_init_mutex.lock();
    table().mutex.lock();
}

void unlock_after_fork() noexcept {
    table().mutex.unlock();
    g_init_mutex.unlock();
}

} // namespace gpumemprof::stacks::python
