# SPDX-License-Identifier: MIT
"""gpumemprof: torch.cuda-style memory figures, line profiles and snapshots from the preloaded
profiler, for a Python program run as ``LD_PRELOAD=libgpumemprof.so python prog.py``.

Pure Python over the library's C API (include/gpumemprof/gpumemprof.h) through ctypes. Importing
always works; calling anything without the library loaded raises NotLoadedError, which says how
to load it. ``device=None`` means the calling thread's current device, as in torch.cuda.
"""
import ctypes
import json
import os
import select
import sys
import threading

__all__ = [
    "NotLoadedError", "is_available", "memory_stats", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
    "empty_cache", "dump", "snapshot", "mark_step", "set_stack_depth", "stack_depth", "LineProfile",
    "attach_out_of_memory_observer",
]


class NotLoadedError(RuntimeError):
    """libgpumemprof.so is not loaded in this process."""


_lib = None
_lib_lock = threading.Lock()

_SIGNATURES = {
    "gpumemprof_is_active": ([], ctypes.c_int),
    "gpumemprof_memory_stats": ([ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_size_t),
    "gpumemprof_memory_allocated": ([ctypes.c_int], ctypes.c_int64),
    "gpumemprof_max_memory_allocated": ([ctypes.c_int], ctypes.c_int64),
    "gpumemprof_memory_reserved": ([ctypes.c_int], ctypes.c_int64),
    "gpumemprof_max_memory_reserved": ([ctypes.c_int], ctypes.c_int64),
    "gpumemprof_reset_peak_memory_stats": ([ctypes.c_int], None),
    "gpumemprof_reset_accumulated_memory_stats": ([ctypes.c_int], None),
    "gpumemprof_empty_cache": ([], None),
    "gpumemprof_dump": ([ctypes.c_char_p], ctypes.c_int),
    "gpumemprof_mark_step": ([ctypes.c_int64], ctypes.c_int64),
    "gpumemprof_set_stack_depth": ([ctypes.c_int], ctypes.c_int),
    "gpumemprof_snapshot_json": ([ctypes.c_char_p, ctypes.c_size_t], ctypes.c_size_t),
    "gpumemprof_oom_count": ([], ctypes.c_int64),
    "gpumemprof_oom_info": ([ctypes.c_int64, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int64),
                             ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)], ctypes.c_int),
    "gpumemprof_oom_fd": ([], ctypes.c_int),
    "gpumemprof_line_profile_begin": ([], ctypes.c_int64),
    "gpumemprof_line_profile_end": ([ctypes.c_int64], ctypes.c_int),
    "gpumemprof_line_profile_report": ([ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                        ctypes.c_size_t], ctypes.c_size_t),
    "gpumemprof_line_profile_release": ([ctypes.c_int64], None),
}


def _api():
    """The library's C API, bound once; NotLoadedError when the library is not in the process."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is None:
            process = ctypes.CDLL(None)  # the global scope, where LD_PRELOAD put the library
            try:
                active = process.gpumemprof_is_active
            except AttributeError:
                raise NotLoadedError(
                    "libgpumemprof.so is not loaded in this process; run the program as "
                    "LD_PRELOAD=/path/to/libgpumemprof.so python ...") from None
            missing = []
            for name, (args, res) in _SIGNATURES.items():
                try:
                    f = getattr(process, name)
                except AttributeError:
                    missing.append(name)
                    continue
                f.argtypes, f.restype = args, res
            if missing:
                raise NotLoadedError("the loaded libgpumemprof.so is older than this package (missing %s)"
                                     % ", ".join(missing))
            if not active():
                raise NotLoadedError("libgpumemprof.so is loaded but not active")
            _lib = process
    return _lib


def _device(device):
    if device is None:
        return -1
    if hasattr(device, "index"):  # torch.device
        return -1 if device.index is None else int(device.index)
    return int(device)


def _text(call):
    """Runs call(buf, size) with a growing buffer until the text fits (it may grow meanwhile)."""
    size = 1 << 16
    for _ in range(8):
        buf = ctypes.create_string_buffer(size)
        need = call(buf, size)
        if need == 0:
            return None
        if need <= size:
            return buf.value.decode("utf-8", "replace")
        size = need + (need >> 2)
    return None


def is_available():
    """True when the profiler is loaded and active in this process."""
    try:
        _api()
        return True
    except NotLoadedError:
        return False


def memory_stats(device=None):
    """torch.cuda.memory_stats(device): a dict of the flat keys ("allocated_bytes.all.current", ...)."""
    _deliver_ooms()
    text = _text(lambda buf, size: _api().gpumemprof_memory_stats(_device(device), buf, size))
    return json.loads(text) if text else {}


def memory_allocated(device=None):
    _deliver_ooms()
    return int(_api().gpumemprof_memory_allocated(_device(device)))


def max_memory_allocated(device=None):
    _deliver_ooms()
    return int(_api().gpumemprof_max_memory_allocated(_device(device)))


def memory_reserved(device=None):
    _deliver_ooms()
    return int(_api().gpumemprof_memory_reserved(_device(device)))


def max_memory_reserved(device=None):
    _deliver_ooms()
    return int(_api().gpumemprof_max_memory_reserved(_device(device)))


def reset_peak_memory_stats(device=None):
    _api().gpumemprof_reset_peak_memory_stats(_device(device))


def reset_accumulated_memory_stats(device=None):
    _api().gpumemprof_reset_accumulated_memory_stats(_device(device))


def empty_cache():
    """Give every wholly free cached segment back to the driver (torch.cuda.empty_cache)."""
    _api().gpumemprof_empty_cache()


def dump(prefix=None):
    """Write the reports now (<prefix>.json, .txt, ...; None: the GPUMEMPROF_OUTPUT prefix).
    Returns True on success."""
    arg = None if prefix is None else os.fsencode(prefix)
    return _api().gpumemprof_dump(arg) == 0


def mark_step(step=None):
    """A step of the program begins (a training iteration): recorded with what each device's pool
    holds now, in the report's "steps" and in the trace, for ``gpumemprof diff FILE --steps A B``.
    ``step=None`` numbers it the previous step + 1 (0 first). Returns the step's number."""
    return int(_api().gpumemprof_mark_step(-1 if step is None else int(step)))


def snapshot():
    """The pool's state in the shape of torch.cuda.memory._snapshot(): "segments" (with "blocks"
    and their "state"), "device_traces", "allocator_settings"; frames are dicts with "filename",
    "line", "name", Python frames included. torch.cuda._memory_viz reads it."""
    text = _text(lambda buf, size: _api().gpumemprof_snapshot_json(buf, size))
    return json.loads(text) if text else {}


def set_stack_depth(depth):
    """Frames kept per call stack from now on (0 stops capturing); returns the previous depth."""
    return int(_api().gpumemprof_set_stack_depth(int(depth)))


def stack_depth():
    return int(_api().gpumemprof_set_stack_depth(-1))


class LineProfile:
    """CuPy's LineProfileHook over the profiler's own stacks: a context manager whose
    print_report() shows, as a tree of ``file:line:function (used_bytes, acquired_bytes)``,
    what was allocated inside the ``with`` block only (by any thread). ``max_depth`` > 0 keeps
    that many innermost frames; ``native=True`` also shows native frames below Python ones."""

    def __init__(self, max_depth=0, native=False):
        self.max_depth = int(max_depth)
        self.native = bool(native)
        self._token = 0
        self._ended = False

    def __enter__(self):
        lib = _api()
        if self._token:
            lib.gpumemprof_line_profile_release(self._token)
        self._token = int(lib.gpumemprof_line_profile_begin())
        self._ended = False
        if self._token == 0:
            raise RuntimeError("gpumemprof: could not start a line profile")
        return self

    def __exit__(self, *exc):
        if self._token:
            _api().gpumemprof_line_profile_end(self._token)
            self._ended = True
        return False

    def report(self):
        """The tree as text (empty before the block has ended)."""
        if not self._token or not self._ended:
            return ""
        flags = 1 if self.native else 0
        text = _text(lambda buf, size: _api().gpumemprof_line_profile_report(
            self._token, self.max_depth, flags, buf, size))
        return text or "_root (0.00B, 0.00B)\n"

    def print_report(self, file=sys.stdout):
        file.write(self.report())

    def __del__(self):
        try:
            if self._token and _lib is not None:
                _lib.gpumemprof_line_profile_release(self._token)
        except Exception:
            pass


# ---- out-of-memory observers ------------------------------------------------------------------
# The library never calls Python from its hook (the failing call may run without the GIL and
# under the framework's allocator lock). It counts each OOM and signals an eventfd; a daemon
# thread here waits on it and calls the observers, and every package call also delivers what
# is pending. A lock and a running index make each OOM reach each observer exactly once.

_observers = []
_oom_lock = threading.Lock()
_delivered = 0
_watcher = None


def _deliver_ooms():
    global _delivered
    if not _observers:
        return
    lib = _api()
    with _oom_lock:
        count = int(lib.gpumemprof_oom_count())
        start, _delivered = _delivered, max(_delivered, count)
        observers = list(_observers)
    for i in range(start, count):
        dev, req, alloc, free = ctypes.c_int(), ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        if lib.gpumemprof_oom_info(i, ctypes.byref(dev), ctypes.byref(req), ctypes.byref(alloc),
                                   ctypes.byref(free)) != 0:
            dev.value, req.value, alloc.value, free.value = -1, 0, 0, 0
        for fn in observers:
            try:
                fn(dev.value, req.value, alloc.value, free.value)
            except Exception:  # an observer's error must not stop the others or the watcher
                sys.excepthook(*sys.exc_info())


def _watch(fd):
    while True:
        try:
            select.select([fd], [], [])
            try:
                os.read(fd, 8)
            except BlockingIOError:
                pass
            _deliver_ooms()
        except Exception:
            return


def attach_out_of_memory_observer(observer):
    """Calls observer(device, requested_bytes, device_allocated, device_free) once per OOM of the
    pool, as torch.cuda.memory._record_memory_history's OOM observers are. OOMs recorded before
    attaching are not delivered. The call comes from a daemon thread (or from the next call into
    this package), shortly after the failed request returned its error."""
    global _watcher, _delivered
    lib = _api()
    with _oom_lock:
        if not _observers:
            _delivered = int(lib.gpumemprof_oom_count())
        _observers.append(observer)
        if _watcher is None:
            fd = int(lib.gpumemprof_oom_fd())
            if fd >= 0:
                _watcher = threading.Thread(target=_watch, args=(fd,), name="gpumemprof-oom", daemon=True)
                _watcher.start()


def _after_fork_in_child():
    # The child's library starts with no OOMs and a new eventfd; the watcher thread is gone.
    global _watcher, _delivered, _oom_lock
    _oom_lock = threading.Lock()  # another thread may have held it at fork
    _watcher = None
    _delivered = 0
    if _observers:
        observers = list(_observers)
        _observers.clear()
        for fn in observers:
            attach_out_of_memory_observer(fn)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
