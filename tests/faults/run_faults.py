#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The fault-injection suite: prog_faults runs one workload with and without
# LD_PRELOAD=libgpumemprof.so while the simulated driver fails chosen calls (SIMCUDA_FAULTS, see
# tests/sim/faults.cpp) or a write shim fails writes to the outputs. For every case:
#  - the program is never hung (each run has a timeout) and exits as it does without the preload;
#  - each error the program is told is the one the driver gave (or its request succeeded another way);
#  - the pool's statistics stay consistent: allocated - freed = current for every key;
#  - the report says what happened (OOMs listed, driver errors counted, write failures warned about);
#  - under -Db_sanitize=address, ASan/LSan run in the program (leaks and memory errors fail it).
import argparse
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "preload"))
import run_case  # noqa: E402  (Checker, prog_env, collect, Run)
from run_case import MIB, Checker, Run, collect  # noqa: E402

TIMEOUT = 60

CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_UNKNOWN = 999


def run(args, tmp, label, preload, workload, env_extra=None, shim=False):
    out_dir = os.path.join(tmp, label)
    os.makedirs(out_dir)
    env = run_case.prog_env(args, out_dir, preload, env_extra)
    if shim:
        env["LD_PRELOAD"] = " ".join(x for x in (env.get("LD_PRELOAD", ""), os.path.abspath(args.shim)) if x)
        if args.asan_runtime and not preload:
            env["LD_PRELOAD"] = args.asan_runtime + " " + env["LD_PRELOAD"]
    try:
        p = subprocess.run([args.prog, workload], env=env, capture_output=True, text=True, timeout=TIMEOUT)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout after %d s" % TIMEOUT
        so = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        se = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    reports, sim = collect(out_dir)
    return Run(label, rc, so, se, reports, sim, out_dir)


def pair(args, tmp, workload, env_extra=None, shim=False):
    return (run(args, tmp, "plain", False, workload, env_extra, shim),
            run(args, tmp, "preload", True, workload, env_extra, shim))


def codes(r, prefix):
    """{index: code} of the program's "prefix.i=code" lines."""
    out = {}
    for k, v in r.values.items():
        if k.startswith(prefix + "."):
            try:
                out[int(k[len(prefix) + 1:])] = int(v)
            except ValueError:
                pass
    return out


def check_common(c, plain, pre):
    """What holds in every case: same exit, no hang, one report, consistent statistics."""
    c.eq("plain: exit code", plain.rc, 0)
    c.eq("preload: exit code (as without the preload, not hung)", pre.rc, plain.rc)
    c.true("preload: no sanitizer report", "Sanitizer" not in pre.stderr,
           [l for l in pre.stderr.splitlines() if "Sanitizer" in l][:3])
    c.eq("preload: one JSON report", len(pre.reports), 1)
    rep = pre.report() or {}
    for d in rep.get("devices", []):
        ms = d.get("memory_stats", {})
        bad = []
        for k, cur in ms.items():
            if not k.endswith(".current"):
                continue
            base = k[:-len(".current")]
            a, f = ms.get(base + ".allocated"), ms.get(base + ".freed")
            if a is not None and f is not None and a - f != cur:
                bad.append("%s: %d - %d != %d" % (base, a, f, cur))
        c.eq("device %s context %s: allocated - freed = current for every key" % (d.get("device"), d.get("context")),
             bad, [])
    leftovers = [p for p in glob.glob(os.path.join(pre.out_dir, "*")) if ".tmp." in os.path.basename(p)]
    c.eq("preload: no temporary files left", leftovers, [])
    return rep


def driver_errors(rep):
    """{code: count} of the non-OOM driver errors the report lists, over all devices."""
    out = {}
    for d in rep.get("devices", []):
        for code, n in (d.get("driver_errors") or {}).items():
            out[int(code)] = out.get(int(code), 0) + n
    return out


# ---- cases -----------------------------------------------------------------------------------------

def case_alloc_oom(args, tmp):
    """The driver refuses the pool's 2nd segment with out-of-memory (once): the pool gives back what
    it caches and asks again, or the program gets the OOM and the report lists it."""
    c = Checker(args.case)
    faults = {"SIMCUDA_FAULTS": "cuMemAlloc@2=%d" % CUDA_ERROR_OUT_OF_MEMORY}
    plain, pre = pair(args, tmp, "alloc", faults)
    rep = check_common(c, plain, pre)
    c.eq("plain: alloc.1 gets the driver's OOM", codes(plain, "alloc").get(1), CUDA_ERROR_OUT_OF_MEMORY)
    got = codes(pre, "alloc")
    c.eq("preload: 24 requests answered", len(got), 24)
    c.true("preload: every code is success or the driver's OOM",
           all(v in (0, CUDA_ERROR_OUT_OF_MEMORY) for v in got.values()), got)
    failed = sum(1 for v in got.values() if v)
    c.true("preload: at most the one injected failure reaches the program", failed <= 1, failed)
    c.eq("preload: OOMs in the report = OOMs the program saw", len(rep.get("ooms", [])), failed)
    return c.finish([plain, pre])


def case_alloc_error(args, tmp):
    """A device error (CUDA_ERROR_UNKNOWN) on the pool's 3rd cuMemAlloc: exactly one request gets
    that code, not an OOM; the report counts it."""
    c = Checker(args.case)
    faults = {"SIMCUDA_FAULTS": "cuMemAlloc@3=%d" % CUDA_ERROR_UNKNOWN}
    plain, pre = pair(args, tmp, "alloc", faults)
    rep = check_common(c, plain, pre)
    c.eq("plain: failed requests", plain.val("failed"), 1)
    got = codes(pre, "alloc")
    c.eq("preload: requests that got CUDA_ERROR_UNKNOWN", sorted(v for v in got.values() if v), [CUDA_ERROR_UNKNOWN])
    c.eq("preload: no OOM recorded for a device error", len(rep.get("ooms", [])), 0)
    c.eq("preload: report counts the driver error", driver_errors(rep), {CUDA_ERROR_UNKNOWN: 1})
    c.true("preload: warning names the error", "999" in pre.stderr or "CUDA_ERROR_UNKNOWN" in pre.stderr,
           pre.stderr[-400:])
    return c.finish([plain, pre])


def case_alloc_sticky(args, tmp):
    """The pool's 4th cuMemAlloc answers CUDA_ERROR_ILLEGAL_ADDRESS, an earlier kernel's fault that
    leaves the context answering it to every later call (a sticky error). The requests before it
    may be served from the cache where the driver was asked without the preload; from the failed
    call on, every request and every free gets the runtime's code for it, as without the preload,
    though the pool could have served them."""
    c = Checker(args.case)
    faults = {"SIMCUDA_FAULTS": "cuMemAlloc@4=%d,cuMemAlloc@4=sticky:%d" % ((CUDA_ERROR_ILLEGAL_ADDRESS,) * 2)}
    plain, pre = pair(args, tmp, "alloc", faults)
    rep = check_common(c, plain, pre)
    plain_codes = set(codes(plain, "alloc").values()) - {0}
    c.eq("plain: one error code from the runtime", len(plain_codes), 1)
    code = next(iter(plain_codes), None)
    got = codes(pre, "alloc")
    c.true("preload: every code is success or the one the program gets without the preload",
           all(v == 0 or v in plain_codes for v in got.values()), got)
    first = min((i for i, v in got.items() if v), default=None)
    c.true("preload: a request failed", first is not None, got)
    c.eq("preload: every request from the first failure on fails",
         sorted(i for i, v in got.items() if first is not None and i >= first and v != code), [])
    frees = {k: v for k, v in codes(pre, "free").items() if first is not None and k > first}
    c.eq("preload: frees after the failure get the code", sorted(set(frees.values())), [code] if frees else [])
    c.eq("preload: kept blocks' frees as without the preload", codes(pre, "free_kept"),
         {k: code for k in codes(pre, "free_kept")})
    c.eq("plain: kept blocks' frees get the code", set(codes(plain, "free_kept").values()), {code})
    sim_failed = pre.sim_calls("cuMemAlloc_v2") - pre.sim_ok("cuMemAlloc_v2")
    c.eq("preload: the driver was asked once after the fault", sim_failed, 1)
    c.eq("preload: report counts the driver error", driver_errors(rep), {CUDA_ERROR_ILLEGAL_ADDRESS: 1})
    c.eq("preload: report's kernel_fault", [d.get("kernel_fault") for d in rep.get("devices", [])],
         [CUDA_ERROR_ILLEGAL_ADDRESS])
    return c.finish([plain, pre])


def case_vmm(args, tmp):
    """cuMemCreate and cuMemMap fail (pass-through calls): the program sees the driver's codes, the
    pass-through ledger counts only what succeeded."""
    c = Checker(args.case)
    faults = {"SIMCUDA_FAULTS": "cuMemCreate@2=%d,cuMemMap@3=%d" % (CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_UNKNOWN)}
    plain, pre = pair(args, tmp, "vmm", faults)
    rep = check_common(c, plain, pre)
    for prefix in ("create", "map"):
        c.eq("preload: %s codes as without the preload" % prefix, codes(pre, prefix), codes(plain, prefix))
    c.eq("plain: create.1 failed", codes(plain, "create").get(1), CUDA_ERROR_OUT_OF_MEMORY)
    c.eq("preload: mapped", pre.val("mapped"), plain.val("mapped"))
    created = sum(1 for v in codes(plain, "create").values() if v == 0)
    phys = mapped = None
    for d in rep.get("devices", []):
        phys = (d.get("passthrough") or {}).get("vmm_physical") or phys
        mapped = (d.get("passthrough") or {}).get("vmm_mapped") or mapped
    if phys is None or mapped is None:
        c.true("report: passthrough.vmm_* present", False, [d.get("passthrough") for d in rep.get("devices", [])])
    else:
        c.eq("report: cuMemCreate counted (successful ones)", phys.get("calls"), created)
        c.eq("report: cuMemRelease counted", phys.get("frees"), created)
        c.eq("report: cuMemMap counted (successful ones)", mapped.get("calls"), plain.val("mapped"))
        c.eq("report: vmm bytes live at exit", (phys.get("current_bytes"), mapped.get("current_bytes")), (0, 0))
    return c.finish([plain, pre])


def case_fences_fail(args, tmp, fault):
    """Fences cannot be recorded or queried: freed memory must still come back for reuse when the
    device is full (64 MiB, 3 x 8 MiB live at a time), as it does without the preload."""
    c = Checker(args.case)
    env = {"SIMCUDA_FAULTS": fault, "SIMCUDA_CAPACITY": "64M"}
    plain, pre = pair(args, tmp, "reuse", env)
    check_common(c, plain, pre)
    c.eq("plain: failed requests", plain.val("failed"), 0)
    c.eq("preload: failed requests", pre.val("failed"), 0)
    return c.finish([plain, pre])


def case_stream_create(args, tmp):
    """The 2nd and 5th cuStreamCreate fail: the program gets the codes the driver gave."""
    c = Checker(args.case)
    faults = {"SIMCUDA_FAULTS": "cuStreamCreate@2=%d,cuStreamCreate@5=%d" % (CUDA_ERROR_OUT_OF_MEMORY,
                                                                             CUDA_ERROR_UNKNOWN)}
    plain, pre = pair(args, tmp, "streams", faults)
    check_common(c, plain, pre)
    c.eq("plain: streams made", plain.val("streams"), 4)
    c.eq("preload: stream codes as without the preload", codes(pre, "stream"), codes(plain, "stream"))
    c.eq("preload: failed requests", pre.val("failed"), 0)
    return c.finish([plain, pre])


def case_context_lost(args, tmp):
    """The program's own context dies behind everyone's back after 4 allocations: the next request
    that reaches the driver fails as without the preload, the pool learns of it and drops the
    context's blocks, frees of the old pointers get the driver's answer, the report says so.
    (Requests served from the pool's cache in between are not checked: see docs/design.md.)"""
    c = Checker(args.case)
    faults = {"SIMCUDA_FAULTS": "cuDeviceGetName@1=lost"}
    plain, pre = pair(args, tmp, "context", faults)
    rep = check_common(c, plain, pre)
    for prefix in ("alloc", "free"):
        c.eq("preload: %s codes as without the preload" % prefix, codes(pre, prefix), codes(plain, prefix))
    c.eq("preload: cuCtxDestroy code", pre.val("destroy"), plain.val("destroy"))
    c.eq("preload: runtime allocation afterwards (the dead context is still current)", pre.val("runtime_alloc"),
         plain.val("runtime_alloc"))
    c.true("preload: a warning says the context was lost", "context" in pre.stderr and "lost" in pre.stderr,
           pre.stderr[-400:])
    dead = [d for d in rep.get("devices", []) if d.get("context_alive") is False]
    c.eq("report: the lost context's pool is marked dead", len(dead), 1)
    c.eq("report: no leaks (the context took its memory)", (rep.get("leaks") or {}).get("bytes"), 0)
    return c.finish([plain, pre])


def case_write_fail(args, tmp, what, errno_value):
    """Writes to the report (or the trace) fail with EIO/ENOSPC: the program runs on and exits as
    it would, a warning names the file and the error, no temporary file stays."""
    c = Checker(args.case)
    env = {"FAULT_WRITE_MATCH": "out-" if what == "report" else ".gmt", "FAULT_WRITE_ERRNO": str(errno_value)}
    if what == "trace":
        env["GPUMEMPROF_TRACE"] = os.path.join(tmp, "run-%p.gmt")
        env["FAULT_WRITE_AFTER"] = "200"  # the header gets through, the first event block does not: the disk is full mid-run
    plain, pre = pair(args, tmp, "alloc", env, shim=True)
    check_common(c, plain, pre) if what == "trace" else None
    c.eq("plain: exit code", plain.rc, 0)
    c.eq("preload: exit code", pre.rc, 0)
    message = os.strerror(errno_value)
    warned = [l for l in pre.stderr.splitlines() if "gpumemprof" in l and message in l]
    c.true("preload: a warning says '%s' for the %s" % (message, what), warned, pre.stderr[-600:])
    if what == "report":
        c.eq("preload: no report written", len(pre.reports), 0)
        leftovers = [p for p in glob.glob(os.path.join(pre.out_dir, "*")) if ".tmp." in os.path.basename(p)]
        c.eq("preload: no temporary files left", leftovers, [])
    return c.finish([plain, pre])


def case_two_devices(args, tmp):
    """One process, two devices (cudaSetDevice 0 then 1): one devices[] entry per device with its
    own figures."""
    c = Checker(args.case)
    plain, pre = pair(args, tmp, "two_devices", {"SIMCUDA_DEVICES": "2"})
    rep = check_common(c, plain, pre)
    c.eq("plain: devices", plain.val("devices"), 2)
    c.eq("preload: c lives on device 1", pre.val("c_device"), 1)
    by_dev = {}
    for d in rep.get("devices", []):
        by_dev.setdefault(d.get("device"), []).append(d)
    c.eq("report: device entries", sorted(by_dev), [0, 1])
    for dev, (count, peak) in {0: (2, 8 * MIB), 1: (1, 7 * MIB)}.items():
        entries = by_dev.get(dev, [])
        c.eq("device %d: one entry" % dev, len(entries), 1)
        if entries:
            ms = entries[0].get("memory_stats", {})
            c.eq("device %d: allocations" % dev, ms.get("allocation.all.allocated"), count)
            c.eq("device %d: peak allocated bytes" % dev, ms.get("allocated_bytes.all.peak"), peak)
            c.eq("device %d: allocated bytes now" % dev, ms.get("allocated_bytes.all.current"), 0)
    devs = {d.get("device"): d.get("bytes") for d in (rep.get("peak") or {}).get("devices", [])}
    c.eq("report: process-wide peak (15 MiB, all live at once)", (rep.get("peak") or {}).get("bytes"), 15 * MIB)
    c.eq("report: peak per device", devs, {0: 8 * MIB, 1: 7 * MIB})
    return c.finish([plain, pre])


CASES = {
    "alloc_oom": case_alloc_oom,
    "alloc_error": case_alloc_error,
    "alloc_sticky": case_alloc_sticky,
    "vmm": case_vmm,
    "event_record_fails": lambda a, t: case_fences_fail(a, t, "cuEventRecord@1+=%d" % CUDA_ERROR_UNKNOWN),
    "event_query_fails": lambda a, t: case_fences_fail(a, t, "cuEventQuery@1+=%d" % CUDA_ERROR_UNKNOWN),
    "events_stuck": lambda a, t: case_fences_fail(a, t, "events_stuck"),
    "stream_create": case_stream_create,
    "context_lost": case_context_lost,
    "report_eio": lambda a, t: case_write_fail(a, t, "report", 5),
    "report_enospc": lambda a, t: case_write_fail(a, t, "report", 28),
    "trace_eio": lambda a, t: case_write_fail(a, t, "trace", 5),
    "trace_enospc": lambda a, t: case_write_fail(a, t, "trace", 28),
    "two_devices": case_two_devices,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--shim", required=True, help="the write-fault LD_PRELOAD shim")
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--asan-runtime", default="")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    return run_case.run_in_tmp(args, CASES, "gpumemprof-fault")


if __name__ == "__main__":
    sys.exit(main())
