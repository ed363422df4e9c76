#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Run one preload case: the program once without and once with LD_PRELOAD=libgpumemprof.so against
# the simulated driver, then check its output, the simulated driver's call counts (SIMCUDA_LOG) and
# the profiler's exit JSON against values computed by hand from PyTorch's allocator rules. The
# cases are in cases_*.py by what they test; what they share is in case_common.py.
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_common import MIB, Checker, Run, collect, prog_env  # noqa: E402,F401  (tests/faults use them)
from cases_doors import (case_dlclose_reuse, case_dlsym_lookup, case_early_ctor, case_entry_point,  # noqa: E402
                         case_hook_doors)
from cases_lifetime import (case_c_api, case_dtor_free, case_fault_after, case_fork_child,  # noqa: E402
                            case_fork_child_alloc, case_sigterm, case_signal_dump)
from cases_pool import (case_bad_config, case_bad_free, case_capture, case_cross_stream_reuse,  # noqa: E402
                        case_device_reset, case_driver_direct, case_driver_footprint, case_driver_footprint_context,
                        case_driver_footprint_graph_memory, case_driver_footprint_async_pool,
                        case_driver_footprint_race,
                        case_expandable, case_ipc, case_library_stream, case_mem_get_info, case_oom, case_passthrough_kinds, case_vmm_first, case_pool_off, case_sequence)
from cases_contexts import CONTEXT_CASES  # noqa: E402
from cases_torch import (case_torch_attach, case_torch_attach_inline, case_torch_autograd, case_torch_autograd_join,  # noqa: E402
                         case_torch_async_backend, case_torch_pluggable, case_torch_pluggable_async,
                         case_torch_pluggable_managed,
                         case_torch_trace)
from cases_trace import case_fenced_replay, case_stack_sampling, case_trace_replay, case_trailing_device  # noqa: E402


CASES = {
    "shared_cudart": lambda a, t: case_sequence(a, t, static=False),
    "static_cudart": lambda a, t: case_sequence(a, t, static=True),
    "driver_direct": case_driver_direct,
    "driver_footprint": case_driver_footprint,
    "driver_footprint_context": case_driver_footprint_context,
    "driver_footprint_graph_memory": case_driver_footprint_graph_memory,
    "driver_footprint_async_pool": case_driver_footprint_async_pool,
    "driver_footprint_race": case_driver_footprint_race,
    "dlsym_lookup": case_dlsym_lookup,
    "hook_doors": case_hook_doors,
    "passthrough_kinds": case_passthrough_kinds,
    "bad_free": case_bad_free,
    "oom": case_oom,
    "cross_stream_reuse": case_cross_stream_reuse,
    "mem_get_info": case_mem_get_info,
    "fork_child": case_fork_child,
    "dlclose_reuse": case_dlclose_reuse,
    "dtor_free": case_dtor_free,
    "fork_child_alloc": case_fork_child_alloc,
    "c_api": case_c_api,
    "fault_after": case_fault_after,
    "pool_off": case_pool_off,
    "bad_config": case_bad_config,
    "early_ctor": case_early_ctor,
    "entry_point_shared": case_entry_point,
    "entry_point_static": case_entry_point,
    "ipc": case_ipc,
    "capture": case_capture,
    "device_reset": case_device_reset,
    "signal_dump": case_signal_dump,
    "sigterm": case_sigterm,
    "library_stream": case_library_stream,
    "trace_replay": case_trace_replay,
    "fenced_replay": case_fenced_replay,
    "trailing_device": case_trailing_device,
    "stack_sampling": case_stack_sampling,
    "expandable": case_expandable,
    "vmm_first": case_vmm_first,
    "torch_attach": case_torch_attach,
    "torch_attach_inline": case_torch_attach_inline,
    "torch_pluggable": case_torch_pluggable,
    "torch_async_backend": case_torch_async_backend,
    "torch_pluggable_async": case_torch_pluggable_async,
    "torch_pluggable_managed": case_torch_pluggable_managed,
    "torch_trace": case_torch_trace,
    "torch_autograd": case_torch_autograd,
    "torch_autograd_join": case_torch_autograd_join,
}
CASES.update(CONTEXT_CASES)


def run_in_tmp(args, cases, prefix):
    """cases[args.case](args, tmp) in a new temporary folder, removed afterwards unless --keep."""
    tmp = tempfile.mkdtemp(prefix="%s-%s-" % (prefix, args.case))
    try:
        return cases[args.case](args, tmp)
    finally:
        if args.keep:
            print("outputs kept in " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--lib", required=True, help="libgpumemprof.so")
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim-dir", required=True, help="directory holding the simulated libcuda.so.1")
    ap.add_argument("--cli", help="the gpumemprof command-line tool (case trace_replay)")
    ap.add_argument("--asan-runtime", default="",
                    help="ASan runtime to preload before the library (builds with -Db_sanitize=address)")
    ap.add_argument("--keep", action="store_true", help="keep the output directory")
    args = ap.parse_args()
    return run_in_tmp(args, CASES, "gpumemprof")


if __name__ == "__main__":
    sys.exit(main())
