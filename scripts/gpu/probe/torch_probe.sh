#!/usr/bin/env bash
# One-off probe of the installed torch's allocator interface (headers, exported symbols, vtable).
set -u
OUT=${OUT:-/tmp/probe-out}
mkdir -p "$OUT/p"
cd "$(dirname "$0")"
python3 - <<'PY' > "$OUT/p/torch_info.txt" 2>&1
import torch, os, sys
print("torch", torch.__version__, torch.version.git_version, "cxx11abi", torch.compiled_with_cxx11_abi())
print("file", torch.__file__)
print("python", sys.version)
import torch.utils.cpp_extension as c
print("include", c.include_paths())
PY
TORCH_DIR=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
INC=$TORCH_DIR/include
tar czf "$OUT/p/headers.tgz" -C "$INC" c10/cuda c10/core c10/util/ApproximateClock.h torch/csrc/autograd/function.h torch/csrc/autograd/engine.h torch/csrc/autograd/graph_task.h torch/csrc/autograd/functions/accumulate_grad.h ATen/SequenceNumber.h ATen/record_function.h c10/core/TensorImpl.h c10/core/StorageImpl.h c10/core/Allocator.h 2>>"$OUT/p/errors.txt"
for lib in libc10_cuda.so libc10.so libtorch_cpu.so libtorch_cuda.so libtorch_python.so; do
  nm -DC --defined-only "$TORCH_DIR/lib/$lib" 2>/dev/null | grep -E "CachingAllocator|AllocatorConfig|sequence_number|get_current_node|currentThreadId|NodeGuard|AccumulateGrad::|CUDAAllocator" > "$OUT/p/nm_$lib.txt"
  nm -D --defined-only "$TORCH_DIR/lib/$lib" 2>/dev/null | grep -E "CachingAllocator|AllocatorConfig|sequence_number|get_current_node|currentThreadId|NodeGuard|AccumulateGrad" > "$OUT/p/nm_raw_$lib.txt"
done
# Slots and offsets compiled against the installed headers, one query per file (a wrong name only loses its line).
CXX="g++ -std=c++17 -w -fsyntax-only"
members="raw_alloc raw_alloc_with_stream raw_delete init getMemoryFraction setMemoryFraction getExpandableSegmentSizes enable isEnabled cacheInfo getBaseAllocation recordStream snapshot beginAllocateToPool endAllocateToPool releasePool getPoolUseCount createOrIncrefPool setUseOnOOM setNoSplit checkPoolLiveAllocations shareIpcHandle getIpcDevPtr isHistoryEnabled recordHistory recordAnnotation pushCompileContext popCompileContext setUserMetadata getUserMetadata attachOutOfMemoryObserver attachAllocatorTraceTracker enablePeerAccess memcpyAsync getCheckpointState setCheckpointPoolState name getDeviceStats resetAccumulatedStats resetPeakStats emptyCache initialized getMemoryInfo allocate raw_deleter copy_data"
mkdir -p /tmp/q
for m in $members; do
cat > /tmp/q/$m.cpp <<CPP
#include <c10/cuda/CUDACachingAllocator.h>
#include <cstdio>
#include <cstring>
template <typename M> long slot(M m) { unsigned long r[2]; std::memcpy(r, &m, 16); return (r[0] & 1) ? (long)((r[0] - 1) / 8) : -1000 - (long)r[0]; }
int main() { printf("slot $m %ld\n", slot(&c10::cuda::CUDACachingAllocator::CUDAAllocator::$m)); }
CPP
done
ls /tmp/q/*.cpp | xargs -P 16 -I{} sh -c 'g++ -std=c++17 -w -I'"$INC"' -I/usr/local/cuda/include {} -o {}.bin 2>{}.err && {}.bin || echo "FAILED $(basename {})"' > "$OUT/p/slots.txt" 2>&1
cat /tmp/q/*.err 2>/dev/null | head -c 20000 > "$OUT/p/slot_errors.txt"
cat > /tmp/q/layout.cpp <<'CPP'
#include <c10/cuda/CUDACachingAllocator.h>
#include <cstdio>
#include <cstddef>
using namespace c10::CachingDeviceAllocator;
#define OFF(T, f) printf("offset " #T "." #f " %zu\n", (size_t)((char*)&((T*)nullptr)->f - (char*)nullptr))
int main() {
  printf("sizeof TraceEntry %zu\n", sizeof(TraceEntry));
  OFF(TraceEntry, action_); OFF(TraceEntry, device_); OFF(TraceEntry, addr_); OFF(TraceEntry, context_);
  OFF(TraceEntry, stream_); OFF(TraceEntry, size_); OFF(TraceEntry, mempool_); OFF(TraceEntry, time_);
  OFF(TraceEntry, compile_context_); OFF(TraceEntry, user_metadata_);
  printf("sizeof DeviceStats %zu\n", sizeof(DeviceStats));
  OFF(DeviceStats, allocation); OFF(DeviceStats, segment); OFF(DeviceStats, active); OFF(DeviceStats, inactive_split);
  OFF(DeviceStats, allocated_bytes); OFF(DeviceStats, reserved_bytes); OFF(DeviceStats, active_bytes);
  OFF(DeviceStats, inactive_split_bytes); OFF(DeviceStats, requested_bytes); OFF(DeviceStats, num_alloc_retries);
  OFF(DeviceStats, num_ooms); OFF(DeviceStats, oversize_allocations); OFF(DeviceStats, oversize_segments);
  OFF(DeviceStats, num_sync_all_streams); OFF(DeviceStats, num_device_alloc); OFF(DeviceStats, num_device_free);
  OFF(DeviceStats, max_split_size);
  printf("sizeof Stat %zu\n", sizeof(Stat));
  printf("actions ALLOC %d FREE_REQUESTED %d FREE_COMPLETED %d SEGMENT_ALLOC %d SEGMENT_FREE %d SEGMENT_MAP %d SEGMENT_UNMAP %d SNAPSHOT %d OOM %d\n",
    TraceEntry::ALLOC, TraceEntry::FREE_REQUESTED, TraceEntry::FREE_COMPLETED, TraceEntry::SEGMENT_ALLOC, TraceEntry::SEGMENT_FREE,
    TraceEntry::SEGMENT_MAP, TraceEntry::SEGMENT_UNMAP, TraceEntry::SNAPSHOT, TraceEntry::OOM);
  printf("sizeof std::function %zu\n", sizeof(AllocatorTraceTracker));
}
CPP
g++ -std=c++17 -w -I"$INC" -I/usr/local/cuda/include /tmp/q/layout.cpp -o /tmp/q/layout 2> "$OUT/p/layout_err.txt" && /tmp/q/layout > "$OUT/p/layout.txt"
cat > /tmp/q/node.cpp <<'CPP'
#include <torch/csrc/autograd/function.h>
#include <cstdio>
#include <cstring>
struct P : torch::autograd::Node {
  static void show() {
    auto a = &P::sequence_nr_; auto b = &P::thread_id_; auto c = &P::topological_nr_;
    long x, y, z; std::memcpy(&x, &a, 8); std::memcpy(&y, &b, 8); std::memcpy(&z, &c, 8);
    printf("Node.sequence_nr_ %ld thread_id_ %ld topological_nr_ %ld sizeof(Node) %zu\n", x, y, z, sizeof(torch::autograd::Node));
  }
};
int main() { P::show(); }
CPP
g++ -std=c++17 -w -I"$INC" -I"$INC/torch/csrc/api/include" -I/usr/local/cuda/include -I$(python3 -c 'import sysconfig;print(sysconfig.get_paths()["include"])') /tmp/q/node.cpp -o /tmp/q/node 2> "$OUT/p/node_err.txt" && /tmp/q/node > "$OUT/p/node.txt"
# The live vtable: what each slot of the allocator object's vtable is, by dladdr.
python3 - <<'PY' > "$OUT/p/vtable.txt" 2>&1
import ctypes, ctypes.util, os, torch
torch.cuda.init(); x = torch.empty(1, device="cuda")
lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libc10_cuda.so")
h = ctypes.CDLL(lib)
sym = ctypes.c_void_p.in_dll(h, "_ZN3c104cuda20CUDACachingAllocator9allocatorE")
addr = ctypes.addressof(sym)
obj = ctypes.c_void_p.from_address(addr).value
vptr = ctypes.c_void_p.from_address(obj).value
class Dl(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
libc = ctypes.CDLL(None)
def name(p):
    d = Dl()
    if libc.dladdr(ctypes.c_void_p(p), ctypes.byref(d)) and d.sname:
        return d.sname.decode() + " +" + str(p - (d.saddr or 0)) + " in " + os.path.basename(d.fname.decode())
    if libc.dladdr(ctypes.c_void_p(p), ctypes.byref(d)):
        return "? in " + os.path.basename(d.fname.decode())
    return "?"
print("allocator object", hex(obj), "vptr", hex(vptr), name(vptr))
print("typeinfo", name(ctypes.c_void_p.from_address(vptr - 8).value))
for i in range(0, 90):
    p = ctypes.c_void_p.from_address(vptr + 8 * i).value
    print(i, hex(p or 0), name(p) if p else "")
PY
