#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Convert a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot pickle) into a gpumemprof
trace (GPUMEMTR format, see src/trace/format.hpp) for `gpumemprof replay`.

Needs no torch: the pickle is read with a restricted unpickler that imports nothing and turns any
class reference into an inert placeholder.

Blocks that were already allocated when recording started are written as live_block events at the
start (replay allocates them first, in address order), so replay starts from the same live state:
  - blocks in `segments` that are active (allocated or pending free) at the end, whose alloc is
    not in the trace;
  - frees in the trace of addresses the trace never allocated.

usage: torch_snapshot_to_trace.py SNAPSHOT.pickle OUT.gmt [--capacity BYTES] [--device-capacity D:BYTES]
The module also exposes TraceWriter (used by the tests to write traces directly).
"""

import argparse
import io
import os
import pickle
import struct
import sys
import zlib

FORMAT_VERSION = 1
MASK64 = (1 << 64) - 1

# EventType values of format.hpp
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, VMM_MAP, VMM_UNMAP, OOM, LIVE_BLOCK, DEVICE_INFO = \
    range(1, 11)

ACTIONS = {
    "alloc": ALLOC,
    "free_requested": FREE_REQUESTED,
    "free_completed": FREE_COMPLETED,
    "segment_alloc": SEGMENT_ALLOC,
    "segment_free": SEGMENT_FREE,
    "segment_map": VMM_MAP,
    "segment_unmap": VMM_UNMAP,
    "oom": OOM,
}


def _varint(v, out):
    v &= MASK64
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zvarint(delta, out):
    d = delta & MASK64
    s = d - (1 << 64) if d >> 63 else d
    _varint(2 * s if s >= 0 else -2 * s - 1, out)


def _str(s, out):
    b = s.encode("utf-8", "replace")
    _varint(len(b), out)
    out.extend(b)


class TraceWriter:
    """Writes the GPUMEMTR format exactly as the C++ trace::Writer does."""

    def __init__(self, path, pid=0, host="", exe="", alloc_conf="", start_time_ns=0, devices=(), metadata=(),
                 events_per_block=4096):
        self._f = open(path, "wb")
        self._per_block = max(1, int(events_per_block))
        self._payload = bytearray()
        self._count = 0
        self._state = [0, 0, 0, 0, 0]  # time, device, stream, ptr, stack
        self.events = 0
        self.blocks = 0
        body = bytearray()
        _varint(pid, body)
        _str(host, body)
        _str(exe, body)
        _str(alloc_conf, body)
        _varint(start_time_ns, body)
        devices = list(devices)
        _varint(len(devices), body)
        for ordinal, total in devices:
            _varint(ordinal, body)
            _varint(total, body)
        metadata = list(metadata)
        _varint(len(metadata), body)
        for k, v in metadata:
            _str(k, body)
            _str(v, body)
        head = b"GPUMEMTR" + struct.pack("<II", FORMAT_VERSION, len(body)) + bytes(body)
        self._f.write(head + struct.pack("<I", zlib.crc32(head) & 0xFFFFFFFF))

    def record(self, etype, device=0, stream=0, ptr=0, size=0, block_size=None, stack_id=0, time_ns=0,
               device_free=0):
        if block_size is None:
            block_size = size
        st = self._state
        out = self._payload
        tag_at = len(out)
        out.append(0)
        tag = etype & 0x0F
        _zvarint(time_ns - st[0], out)
        st[0] = time_ns & MASK64
        if device != st[1]:
            tag |= 0x10
            _varint(device, out)
            st[1] = device
        if stream & MASK64 != st[2]:
            tag |= 0x20
            _varint(stream, out)
            st[2] = stream & MASK64
        _zvarint(ptr - st[3], out)
        st[3] = ptr & MASK64
        _varint(size, out)
        _zvarint(block_size - size, out)
        if stack_id != st[4]:
            tag |= 0x40
            _varint(stack_id, out)
            st[4] = stack_id
        if etype == OOM:
            _varint(device_free, out)
        out[tag_at] = tag
        self._count += 1
        self.events += 1
        if self._count >= self._per_block:
            self.flush()

    def _block(self, magic, count, payload):
        lc = struct.pack("<II", len(payload), count)
        crc = zlib.crc32(bytes(payload), zlib.crc32(lc)) & 0xFFFFFFFF
        self._f.write(magic + lc + struct.pack("<I", crc) + bytes(payload))

    def flush(self):
        if self._count:
            self._block(b"GMTB", self._count, self._payload)
            self.blocks += 1
        self._payload = bytearray()
        self._count = 0
        self._state = [0, 0, 0, 0, 0]
        self._f.flush()

    def close(self, end_record=True):
        if self._f.closed:
            return
        self.flush()
        if end_record:
            payload = bytearray()
            _varint(self.events, payload)
            _varint(self.blocks, payload)
            self._block(b"GMTE", 0, payload)
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- snapshot reading -------------------------------------------------------------------------

class _Opaque:
    """Stands in for any class the pickle names; keeps whatever it is given, does nothing."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state

    def __call__(self, *args, **kwargs):
        return _Opaque(*args)


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        # Never import anything: a snapshot is plain dicts/lists/ints/strings; anything else
        # becomes an inert placeholder.
        return type(name, (_Opaque,), {"__module__": "opaque." + module})

    def persistent_load(self, pid):
        return _Opaque(pid)


def load_snapshot(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        snap = _SafeUnpickler(io.BytesIO(data)).load()
    except Exception as e:  # noqa: BLE001 - any unpickling problem is a user error here
        raise ValueError("%s: not a readable pickle (%s: %s)" % (path, type(e).__name__, e))
    if isinstance(snap, list):  # very old torch: _snapshot() returned the segment list only
        snap = {"segments": snap, "device_traces": []}
    if not isinstance(snap, dict) or "segments" not in snap:
        raise ValueError("%s: not a PyTorch memory snapshot (no 'segments')" % path)
    return snap


def _int(x, default=0):
    return x if isinstance(x, int) and not isinstance(x, bool) else default


# Device numbers a trace may carry: `gpumemprof replay` simulates at most this many devices
# (tools/replay.hpp kMaxReplayDevices); anything else in a snapshot is malformed.
MAX_DEVICES = 1024


def _u64(x):
    """x if it is an int that fits an unsigned 64-bit field, else None."""
    return x if isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MASK64 else None


def _device(x):
    """A device number replay accepts, else None."""
    return x if isinstance(x, int) and not isinstance(x, bool) and 0 <= x < MAX_DEVICES else None


def convert(snap, out_path, capacity=0, source=""):
    """Write the trace; returns a dict of counts (events, live_blocks, skipped entries)."""
    counts = {"skipped_entries": 0, "skipped_segments": 0}
    raw_segments = snap.get("segments") or []
    if not isinstance(raw_segments, list):
        raw_segments = []
    segments = []
    for s in raw_segments:
        # A segment without a usable device number, address or size cannot be placed.
        if not isinstance(s, dict) or _device(s.get("device", 0)) is None or \
                _u64(s.get("address", 0)) is None or _u64(s.get("total_size", 0)) is None:
            counts["skipped_segments"] += 1
            continue
        segments.append(s)
    traces = snap.get("device_traces") or []
    if not isinstance(traces, list):
        traces = []
    for d in range(MAX_DEVICES, len(traces)):  # more device lists than replay can simulate
        if traces[d]:
            counts["skipped_entries"] += len(traces[d]) if isinstance(traces[d], list) else 1
    traces = traces[:MAX_DEVICES]
    devices = set(range(len(traces)))
    for s in segments:
        devices.add(_int(s.get("device")))
    settings = snap.get("allocator_settings") or {}
    conf = settings.get("PYTORCH_CUDA_ALLOC_CONF", "") if isinstance(settings, dict) else ""
    if not isinstance(conf, str):
        conf = ""

    events = []          # (device, etype, kwargs) in trace order, device by device
    live_blocks = {}     # device -> {addr: (size, block_size, stream)}
    reserved_at_start = {}
    for d in sorted(devices):
        entries = traces[d] if d < len(traces) and isinstance(traces[d], list) else []
        live = set()     # addresses allocated in the trace and not yet completely freed
        requested = set()  # free requested, completion not seen yet
        pre = {}         # addr -> (size, block_size, stream): allocated before the recording
        for e in entries:
            if not isinstance(e, dict):
                counts["skipped_entries"] += 1
                continue
            etype = ACTIONS.get(e.get("action"))
            if etype is None:  # snapshot, annotate, ...: nothing to replay
                counts["skipped_entries"] += 1
                continue
            addr = _u64(e.get("addr", 0))
            size = _u64(e.get("size", 0))
            if addr is None or size is None:  # negative or beyond 64 bits: not a real block
                counts["skipped_entries"] += 1
                continue
            stream = _int(e.get("stream")) & MASK64
            t = _int(e.get("time_us")) * 1000
            kw = dict(device=d, stream=stream, ptr=addr, size=size, time_ns=t)
            if etype == ALLOC:
                live.add(addr)
                requested.discard(addr)
            elif etype == FREE_REQUESTED:
                if addr not in live and addr not in requested:
                    pre.setdefault(addr, (size, size, stream))  # freed, never allocated here
                requested.add(addr)
            elif etype == FREE_COMPLETED:
                if addr in live:
                    live.discard(addr)
                elif addr not in requested:  # its free_requested fell out of the ring buffer
                    pre.setdefault(addr, (size, size, stream))
                requested.discard(addr)
            elif etype == OOM:
                kw["ptr"] = 0
                kw["device_free"] = _int(e.get("device_free"))
            events.append((etype, kw))
        # Active blocks at the end that the trace did not allocate were there before it began.
        for s in segments:
            if _int(s.get("device")) != d:
                continue
            addr = _int(s.get("address"))
            stream = _int(s.get("stream")) & MASK64
            blocks = s.get("blocks") or []
            for b in blocks if isinstance(blocks, list) else []:
                if not isinstance(b, dict):
                    continue
                size = _u64(b.get("size", 0)) or 0
                if b.get("state") in ("active_allocated", "active_pending_free", "active_awaiting_free") \
                        and addr not in live and addr not in pre:
                    pre[addr] = (_u64(b.get("requested_size", size)) or size, size, stream)
                addr += size
        live_blocks[d] = pre
        # Reserved bytes when recording began = bytes of the final segments minus the trace's net
        # growth; lets `gpumemprof replay` show PyTorch's own peak next to the replayed one.
        net = 0
        for etype, kw in events:
            if kw["device"] == d and etype in (SEGMENT_ALLOC, VMM_MAP):
                net += kw["size"]
            elif kw["device"] == d and etype in (SEGMENT_FREE, VMM_UNMAP):
                net -= kw["size"]
        final = sum(_int(s.get("total_size")) for s in segments if _int(s.get("device")) == d)
        reserved_at_start[d] = final - net

    header_devices = [(d, int(capacity)) for d in sorted(devices)]
    metadata = [("source", "torch memory snapshot"), ("converted_by", "torch_snapshot_to_trace.py")]
    if source:
        metadata.append(("snapshot", source))
    for d in sorted(devices):
        metadata.append(("reserved_at_start.%d" % d, str(max(0, reserved_at_start[d]))))
    n_live = 0
    with TraceWriter(out_path, alloc_conf=conf, start_time_ns=0, devices=header_devices,
                     metadata=metadata) as w:
        for d in sorted(devices):
            for addr in sorted(live_blocks[d]):
                size, block_size, stream = live_blocks[d][addr]
                w.record(LIVE_BLOCK, device=d, stream=stream, ptr=addr, size=size, block_size=block_size)
                n_live += 1
        for etype, kw in events:
            w.record(etype, **kw)
        counts["events"] = w.events
    counts["live_blocks"] = n_live
    counts["devices"] = len(devices)
    return counts


def _parse_capacity(text):
    units = {"": 0, "B": 0, "K": 10, "M": 20, "G": 30, "T": 40}
    t = text.strip().upper().replace("IB", "")
    num = t.rstrip("KMGTB")
    suffix = t[len(num):]
    if not num.isdigit() or suffix not in units:
        raise argparse.ArgumentTypeError("not a size: %r" % text)
    return int(num) << units[suffix]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot", help="pickle written by torch.cuda.memory._dump_snapshot")
    ap.add_argument("out", help="trace file to write")
    ap.add_argument("--capacity", type=_parse_capacity, default=0,
                    help="device memory to record for every device (e.g. 80G); default: unknown")
    args = ap.parse_args(argv)
    try:
        snap = load_snapshot(args.snapshot)
        counts = convert(snap, args.out, args.capacity, source=os.path.basename(args.snapshot))
    except (OSError, ValueError) as e:
        print("torch_snapshot_to_trace: %s" % e, file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a snapshot shaped in a way not foreseen: say so, no traceback
        print("torch_snapshot_to_trace: %s: not a usable PyTorch memory snapshot (%s: %s)"
              % (args.snapshot, type(e).__name__, e), file=sys.stderr)
        try:
            os.unlink(args.out)
        except OSError:
            pass
        return 1
    print("wrote %s: %d events on %d device(s), %d blocks live before recording, %d entries and %d segments "
          "skipped" % (args.out, counts["events"], counts["devices"], counts["live_blocks"],
                       counts["skipped_entries"], counts["skipped_segments"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
