#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Checks src/core/torch_abi.hpp against the installed torch: compiles a probe against torch's own
# headers (torch/include) with the system C++ compiler, which prints every vtable slot, byte
# offset and enum value the library relies on, and compares it with our table's entry for that
# torch version (printed by a second small program that includes torch_abi.hpp).
# Prints one JSON object; exit 0 when every value matches, 1 when one differs, 77 without torch.
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

PROBE = r'''
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/autograd/function.h>
#include <cstddef>
#include <cstdio>
#include <cstring>
using c10::cuda::CUDACachingAllocator::CUDAAllocator;
using c10::CachingDeviceAllocator::TraceEntry;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::AcceleratorAllocatorConfig;
// Itanium ABI: a pointer to a virtual member function holds 1 + its vtable byte offset.
template <typename M> long slot(M m) { unsigned long r[2]; std::memcpy(r, &m, 16); return (r[0] & 1) ? (long)((r[0] - 1) / 8) : -1; }
template <typename M> long data_offset(M m) { long v; std::memcpy(&v, &m, sizeof v); return v; }
// Offsets of private and protected members: an explicit instantiation may name them.
template <typename Tag, typename Tag::type M> struct Rob { friend typename Tag::type get(Tag) { return M; } };
#define ROB(tag, T, cls, member) struct tag { using type = T cls::*; friend type get(tag); }; template struct Rob<tag, &cls::member>;
ROB(MaxSplit, std::atomic<size_t>, AcceleratorAllocatorConfig, max_split_size_)
ROB(Expandable, std::atomic<bool>, AcceleratorAllocatorConfig, use_expandable_segments_)
ROB(SeqNr, uint64_t, torch::autograd::Node, sequence_nr_)
ROB(ThreadId, uint64_t, torch::autograd::Node, thread_id_)
#define OFF(T, f) ((long)((char*)&((T*)nullptr)->f - (char*)nullptr))
int main() {
  std::printf("{\"slot_get_device_stats\": %ld, \"slot_attach_trace_tracker\": %ld, \"slot_name\": %ld,\n",
              slot(&CUDAAllocator::getDeviceStats), slot(&CUDAAllocator::attachAllocatorTraceTracker), slot(&CUDAAllocator::name));
  std::printf("\"slot_empty_cache\": %ld, \"slot_reset_accumulated\": %ld, \"slot_reset_peak\": %ld,\n",
              slot(static_cast<void (CUDAAllocator::*)(c10::MempoolId_t)>(&CUDAAllocator::emptyCache)),
              slot(&CUDAAllocator::resetAccumulatedStats), slot(&CUDAAllocator::resetPeakStats));
  std::printf("\"entry_action\": %ld, \"entry_device\": %ld, \"entry_addr\": %ld, \"entry_stream\": %ld, \"entry_size\": %ld, \"entry_mempool\": %ld,\n",
              OFF(TraceEntry, action_), OFF(TraceEntry, device_), OFF(TraceEntry, addr_), OFF(TraceEntry, stream_), OFF(TraceEntry, size_), OFF(TraceEntry, mempool_));
  std::printf("\"sizeof_action\": %zu, \"sizeof_device\": %zu, \"sizeof_mempool\": %zu,\n", sizeof(TraceEntry::Action), sizeof(c10::DeviceIndex), sizeof(c10::MempoolId_t));
  std::printf("\"actions\": [%d, %d, %d, %d, %d, %d, %d, %d, %d],\n", TraceEntry::ALLOC, TraceEntry::FREE_REQUESTED, TraceEntry::FREE_COMPLETED,
              TraceEntry::SEGMENT_ALLOC, TraceEntry::SEGMENT_FREE, TraceEntry::SEGMENT_MAP, TraceEntry::SEGMENT_UNMAP, TraceEntry::SNAPSHOT, TraceEntry::OOM);
  std::printf("\"stats_bytes\": %zu, \"stats_arrays\": [%ld, %ld, %ld, %ld, %ld, %ld, %ld, %ld, %ld],\n", sizeof(DeviceStats),
              OFF(DeviceStats, allocation), OFF(DeviceStats, segment), OFF(DeviceStats, active), OFF(DeviceStats, inactive_split),
              OFF(DeviceStats, allocated_bytes), OFF(DeviceStats, reserved_bytes), OFF(DeviceStats, active_bytes),
              OFF(DeviceStats, inactive_split_bytes), OFF(DeviceStats, requested_bytes));
  std::printf("\"stats_num_alloc_retries\": %ld, \"stats_num_ooms\": %ld, \"stats_oversize_allocations\": %ld, \"stats_oversize_segments\": %ld, "
              "\"stats_num_sync_all_streams\": %ld, \"stats_num_device_alloc\": %ld, \"stats_num_device_free\": %ld, \"stats_max_split_size\": %ld,\n",
              OFF(DeviceStats, num_alloc_retries), OFF(DeviceStats, num_ooms), OFF(DeviceStats, oversize_allocations), OFF(DeviceStats, oversize_segments),
              OFF(DeviceStats, num_sync_all_streams), OFF(DeviceStats, num_device_alloc), OFF(DeviceStats, num_device_free), OFF(DeviceStats, max_split_size));
  std::printf("\"config_max_split_size\": %ld, \"config_expandable_segments\": %ld, \"node_sequence_nr\": %ld, \"node_thread_id\": %ld}\n",
              data_offset(get(MaxSplit{})), data_offset(get(Expandable{})), data_offset(get(SeqNr{})), data_offset(get(ThreadId{})));
}
'''

OURS = r'''
#include "core/torch_abi.hpp"
#include <cstdio>
#include <cstdlib>
using namespace gpumemprof::core::torch_abi;
int main(int argc, char** argv) {
  const Layout* l = layout_for(std::atoi(argv[1]), std::atoi(argv[2]));
  if (!l) { std::printf("null\n"); return 0; }
  const Actions& a = l->actions;
  std::printf("{\"slot_get_device_stats\": %d, \"slot_attach_trace_tracker\": %d, \"slot_name\": %d,\n", l->slot_get_device_stats, l->slot_attach_trace_tracker, l->slot_name);
  std::printf("\"slot_empty_cache\": %d, \"slot_reset_accumulated\": %d, \"slot_reset_peak\": %d,\n", l->slot_empty_cache, l->slot_reset_accumulated, l->slot_reset_peak);
  std::printf("\"entry_action\": %zu, \"entry_device\": %zu, \"entry_addr\": %zu, \"entry_stream\": %zu, \"entry_size\": %zu, \"entry_mempool\": %zu,\n",
              l->entry_action, l->entry_device, l->entry_addr, l->entry_stream, l->entry_size, l->entry_mempool);
  std::printf("\"sizeof_action\": 4, \"sizeof_device\": 1, \"sizeof_mempool\": 16,\n");
  std::printf("\"actions\": [%d, %d, %d, %d, %d, %d, %d, %d, %d],\n", a.alloc, a.free_requested, a.free_completed, a.segment_alloc, a.segment_free,
              a.segment_map, a.segment_unmap, a.snapshot, a.oom);
  std::printf("\"stats_bytes\": %zu, \"stats_arrays\": [0, 96, 192, 288, 384, 480, 576, 672, 768],\n", l->stats_bytes);
  std::printf("\"stats_num_alloc_retries\": %zu, \"stats_num_ooms\": %zu, \"stats_oversize_allocations\": %zu, \"stats_oversize_segments\": %zu, "
              "\"stats_num_sync_all_streams\": %zu, \"stats_num_device_alloc\": %zu, \"stats_num_device_free\": %zu, \"stats_max_split_size\": %zu,\n",
              l->stats_num_alloc_retries, l->stats_num_ooms, l->stats_oversize_allocations, l->stats_oversize_segments, l->stats_num_sync_all_streams,
              l->stats_num_device_alloc, l->stats_num_device_free, l->stats_max_split_size);
  std::printf("\"config_max_split_size\": %zu, \"config_expandable_segments\": %zu, \"node_sequence_nr\": %zu, \"node_thread_id\": %zu}\n",
              l->config_max_split_size, l->config_expandable_segments, l->node_sequence_nr, l->node_thread_id);
}
'''


def compile_run(src, flags, args=()):
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "p.cpp"), os.path.join(d, "p")
        open(c, "w").write(src)
        p = subprocess.run(["g++", "-std=c++20", "-w", c, "-o", exe] + flags, capture_output=True, text=True)
        if p.returncode != 0:
            return None, p.stderr[-4000:]
        r = subprocess.run([exe, *args], capture_output=True, text=True)
        return r.stdout, r.stderr


def main():
    try:
        import torch
    except ImportError:
        print(json.dumps({"skipped": "no torch"}))
        return 77
    tdir = os.path.dirname(torch.__file__)
    inc = os.path.join(tdir, "include")
    import sysconfig
    cuda_inc = os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/include"
    flags = ["-I" + inc, "-I" + os.path.join(inc, "torch/csrc/api/include"), "-I" + cuda_inc,
             "-I" + sysconfig.get_paths()["include"], "-L" + os.path.join(tdir, "lib"), "-lc10", "-ltorch_cpu",
             "-Wl,-rpath," + os.path.join(tdir, "lib")]
    theirs_text, err = compile_run(PROBE, flags)
    version = torch.__version__
    major, minor = (int(x) for x in version.split(".")[:2])
    ours_text, err2 = compile_run(OURS, ["-I" + os.path.join(ROOT, "src")], (str(major), str(minor)))
    out = {"torch": version, "probe_error": err if theirs_text is None else None}
    if theirs_text is None or ours_text is None:
        out["ours_error"] = err2 if ours_text is None else None
        print(json.dumps(out, indent=1))
        return 1
    theirs, ours = json.loads(theirs_text), json.loads(ours_text)
    if ours is None:
        out["known"] = False
        out["theirs"] = theirs
        print(json.dumps(out, indent=1))
        return 1
    out["fields"] = {k: {"ours": ours.get(k), "headers": v, "ok": ours.get(k) == v} for k, v in theirs.items()}
    out["all_ok"] = all(f["ok"] for f in out["fields"].values())
    print(json.dumps(out, indent=1))
    return 0 if out["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
