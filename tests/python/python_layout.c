/* SPDX-License-Identifier: MIT
 * Prints, from one CPython's own internal headers, every layout fact that
 * src/stacks/python_frames.cpp assumes (names as in python::assumed_layout). Compiled and run
 * by check_layouts.py once per installed interpreter. */
#define Py_BUILD_CORE 1
/* Python.h first, then the internal headers that need its types. */
/* clang-format off */
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "internal/pycore_frame.h"
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_stackref.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_runtime.h"
#endif
/* clang-format on */

#define P(name, value) printf("%s %zu\n", name, (size_t)(value))

static unsigned state_bits(int which) {
    PyASCIIObject a;
    unsigned v = 0;
    memset(&a, 0, sizeof a);
    if (which == 0)
        a.state.kind = 7;
    if (which == 1)
        a.state.compact = 1;
    if (which == 2)
        a.state.ascii = 1;
    memcpy(&v, &a.state, sizeof v);
    return v;
}

int main(void) {
    P("str.kind_mask", state_bits(0));
    P("str.compact_bit", state_bits(1));
    P("str.ascii_bit", state_bits(2));
#if PY_VERSION_HEX < 0x030D0000
    P("ts.cframe", offsetof(PyThreadState, cframe));
    P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
    P("ts.interp", offsetof(PyThreadState, interp));
    P("frame.code", offsetof(_PyInterpreterFrame, f_code));
    P("frame.previous", offsetof(_PyInterpreterFrame, previous));
    P("frame.instr", offsetof(_PyInterpreterFrame, prev_instr));
    P("frame.owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030C0000
    P("frame.is_entry", offsetof(_PyInterpreterFrame, is_entry));
    P("frame.func", offsetof(_PyInterpreterFrame, f_func));
    P("func.code", offsetof(PyFunctionObject, func_code));
    P("func.version", offsetof(PyFunctionObject, func_version));
    P("type.name", offsetof(PyTypeObject, tp_name));
    P("type.dealloc", offsetof(PyTypeObject, tp_dealloc));
#else
    P("owner.shim", FRAME_OWNED_BY_CSTACK);
    P("event.code_create", PY_CODE_EVENT_CREATE);
#endif
    P("code.filename", offsetof(PyCodeObject, co_filename));
    P("code.qualname", offsetof(PyCodeObject, co_qualname));
    P("code.linetable", offsetof(PyCodeObject, co_linetable));
    P("code.firstlineno", offsetof(PyCodeObject, co_firstlineno));
    P("code.code", offsetof(PyCodeObject, co_code_adaptive));
#if PY_VERSION_HEX >= 0x030C0000
    P("code.version", offsetof(PyCodeObject, co_version));
#endif
    P("object.type", offsetof(PyObject, ob_type));
    P("bytes.size", offsetof(PyVarObject, ob_size));
    P("bytes.sval", offsetof(PyBytesObject, ob_sval));
    P("str.length", offsetof(PyASCIIObject, length));
    P("str.state", offsetof(PyASCIIObject, state));
    P("str.ascii_size", sizeof(PyASCIIObject));
    P("str.compact_size", sizeof(PyCompactUnicodeObject));
#else
#define D(name, member) P("debug." name, offsetof(_Py_DebugOffsets, member))
    D("version", version);
    D("free_threaded", free_threaded);
    D("thread_state.current_frame", thread_state.current_frame);
    D("thread_state.interp", thread_state.interp);
    D("interpreter_frame.previous", interpreter_frame.previous);
    D("interpreter_frame.executable", interpreter_frame.executable);
    D("interpreter_frame.instr_ptr", interpreter_frame.instr_ptr);
    D("interpreter_frame.owner", interpreter_frame.owner);
    D("code_object.filename", code_object.filename);
    D("code_object.qualname", code_object.qualname);
    D("code_object.linetable", code_object.linetable);
    D("code_object.firstlineno", code_object.firstlineno);
    D("code_object.co_code_adaptive", code_object.co_code_adaptive);
    D("pyobject.ob_type", pyobject.ob_type);
    D("bytes_object.ob_size", bytes_object.ob_size);
    D("bytes_object.ob_sval", bytes_object.ob_sval);
    D("unicode_object.state", unicode_object.state);
    D("unicode_object.length", unicode_object.length);
    D("unicode_object.asciiobject_size", unicode_object.asciiobject_size);
    P("str.compact_extra", sizeof(PyCompactUnicodeObject) - sizeof(PyASCIIObject));
#if PY_VERSION_HEX >= 0x030E0000
    P("owner.shim", FRAME_OWNED_BY_INTERPRETER); /* and every owner above it */
    P("stackref.tag_bits", Py_TAG_BITS);
#else
    P("owner.shim", FRAME_OWNED_BY_CSTACK);
#endif
    P("code.version", offsetof(PyCodeObject, co_version));
    P("event.code_create", PY_CODE_EVENT_CREATE);
#endif
    return 0;
}
