#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GPU check: PyTorch programs run exactly as without the profiler, with PyTorch's own caching
allocator attached (GPUMEMPROF_TORCH=attach, the default). Each workload of scripts/gpu/attach/
runs without and with the preload; checked: the same exit status and outputs, the driver's
used-memory figure at the same moments within 1%, the report naming the script's own lines, every
torch.cuda.memory_stats() key equal to the profiler's at the same moments (and at exit, read from
PyTorch itself), and step times against today's pool mode (GPUMEMPROF_TORCH=pool).
Writes one JSON file (--out) and prints one line per check."""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WL = os.path.join(HERE, "attach")

# name, script, arguments, extra environment, compare the step time with the pool mode
WORKLOADS = [
    ("hf_train", "hf_train.py", ["8"], {}, True),
    ("hf_generate", "hf_generate.py", [], {}, False),
    ("detection", "detection.py", [], {}, False),
    ("compile_default", "compiled.py", ["default"], {}, False),
    ("compile_reduce_overhead", "compiled.py", ["reduce-overhead"], {}, False),
    ("cuda_graph", "graph.py", [], {}, False),
    ("mempool", "mempool.py", [], {}, False),
    ("expandable", "hf_train.py", ["6"], {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, False),
    ("memlog", "memlog.py", [], {}, False),
    ("mp_share", "mp_share.py", [], {}, False),
    ("autograd_lines", "autograd_lines.py", [], {}, False),
    ("timm_train", "timm_train.py", [], {}, False),
    ("lightning_train", "lightning_train.py", [], {}, False),
    # A program's own allocator in PyTorch (PLUGGABLE_SO: scripts/gpu/build-check-programs.sh's).
    ("pluggable_pool_plain", "pluggable.py", ["pool_plain"], {"PLUGGABLE_SO": "{bin}/pluggable_alloc.so"}, False),
    ("pluggable_pool_vmm", "pluggable.py", ["pool_vmm"], {"PLUGGABLE_SO": "{bin}/pluggable_alloc.so"}, False),
    ("pluggable_pool_async", "pluggable.py", ["pool_async"], {"PLUGGABLE_SO": "{bin}/pluggable_alloc.so"}, False),
    ("pluggable_pool_managed", "pluggable.py", ["pool_managed"], {"PLUGGABLE_SO": "{bin}/pluggable_alloc.so"},
     False),
    ("pluggable_global", "pluggable.py", ["global_plain"], {"PLUGGABLE_SO": "{bin}/pluggable_alloc.so"}, False),
    ("async_backend", "async_backend.py", [], {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}, False),
    ("threads", "threads.py", [], {}, False),
    ("mixed", "mixed.py", [], {}, False),
]
# Workloads where PyTorch's native allocator does not serve the program: nothing to attach to.
UNATTACHED = {"pluggable_global", "async_backend"}

RESULTS = []


def record(name, ok, **numbers):
    RESULTS.append({"check": name, "pass": bool(ok), **numbers})
    print(("PASS " if ok else "FAIL ") + name + " " + json.dumps(numbers)[:600], flush=True)


def run(script, args, env_extra, lib, torch_mode=None, keep=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_") and k != "LD_PRELOAD"}
    env.update(env_extra)
    out_dir = tempfile.mkdtemp(prefix="attach-")
    env["GPUMEMPROF_OUTPUT"] = os.path.join(out_dir, "prof-%p")
    # Every run compiles afresh: a compile cache warmed by the run before would spare the next
    # one its autotuning (and its memory), and the two would not be the same program run.
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(out_dir, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(out_dir, "triton")
    if lib:
        env["LD_PRELOAD"] = lib
    if torch_mode:
        env["GPUMEMPROF_TORCH"] = torch_mode
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, os.path.join(WL, script)] + args, env=env, capture_output=True, text=True,
                           timeout=300, cwd=WL)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", str(e.stdout or ""), str(e.stderr or "")
    wall = time.perf_counter() - t0
    out = None
    for line in so.splitlines():
        if line.startswith("{"):
            try:
                out = json.loads(line)
            except ValueError:
                pass
    reports, dumps = [], {}
    for f in sorted(glob.glob(os.path.join(out_dir, "prof-*.json"))):
        try:
            reports.append(json.load(open(f)))
        except ValueError:
            reports.append({"_error": f})
    for f in sorted(glob.glob(os.path.join(out_dir, "dump-*.json"))):  # asked for by the workload
        try:
            dumps[os.path.basename(f)[5:-5]] = json.load(open(f))
        except ValueError:
            dumps[os.path.basename(f)[5:-5]] = {"_error": f}
    if keep:
        for f in glob.glob(os.path.join(out_dir, "prof-*")) + glob.glob(os.path.join(out_dir, "dump-*")):
            shutil.copy(f, os.path.join(keep, os.path.basename(f)))
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"rc": rc, "out": out, "reports": reports, "dumps": dumps, "stderr": se[-2500:], "wall": wall}


def close(a, b, rel=2e-2):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= rel * max(abs(a), abs(b), 1e-6)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    return a == b


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None


def main_report(reports):
    """The parent's report: the one with PyTorch's allocator attached, else the first."""
    for r in reports:
        if any(d.get("allocator") == "pytorch" for d in r.get("devices", [])):
            return r
    return reports[0] if reports else {}


def user_line_sites(report, script, top=5):
    """Of the top call sites by bytes live at the peak, those with a frame in the workload's script."""
    sites = report.get("sites", [])
    frames = report.get("frames")  # a frame table (JSON version 2) or inline frames

    def site_frames(s):
        if "frames" in s and s["frames"] and isinstance(s["frames"][0], dict):
            return s["frames"]
        return [frames[i] for i in s.get("frame_ids", s.get("frames", []))] if frames else []

    ranked = sorted(sites, key=lambda s: -s.get("peak_live_bytes", 0))[:top]
    hits = []
    for s in ranked:
        # The frame the report leads with ("<- your code"), else the nearest frame of the script.
        uf = s.get("user_frame")
        lead = [frames[uf]] if isinstance(uf, int) and frames and uf < len(frames) else []
        for f in lead + site_frames(s):
            if f.get("file", "").endswith(script):
                hits.append("%s:%s:%s" % (script, f.get("line"), f.get("function")))
                break
    return hits, len(ranked)


def marker_lines(script):
    lines = {}
    for n, text in enumerate(open(os.path.join(WL, script)), 1):
        if "# LINE_" in text:
            lines[text.split("# LINE_")[1].split()[0]] = n
    return lines


def site_frames_of(report):
    frames = report.get("frames")
    for s in report.get("sites", []):
        fs = s.get("frames") or []
        if fs and not isinstance(fs[0], dict):
            fs = [frames[i] for i in fs]
        elif not fs and frames and "frame_ids" in s:
            fs = [frames[i] for i in s["frame_ids"]]
        yield s, fs


def check_autograd(name, script, rep, out):
    """Backward sites name the forward line of their node; the kinds at the peak match the
    hand-computed parameter, gradient and optimizer-state bytes."""
    lines = marker_lines(script)
    want = {"AddmmBackward0": {lines["FC1"], lines["FC2"]}, "GeluBackward0": {lines["GELU"]},
            "MeanBackward0": {lines["LOSS"]}, "PowBackward0": {lines["LOSS"]}}
    seen, wrong = {}, []
    for s, fs in site_frames_of(rep):
        for i, f in enumerate(fs):
            fn = f.get("function", "")
            if not fn.startswith("backward of "):
                continue
            node = fn[len("backward of "):].split(" ")[0]
            # The frames run one way or the other: the forward stack is on the side away from the
            # backward pass's own (autograd engine) frames; take the nearest frame of the script.
            script_lines = [g.get("line") for g in fs if g.get("file", "").endswith(script)]
            if node in want:
                seen.setdefault(node, set()).update(script_lines)
                if not set(script_lines) & want[node]:
                    wrong.append((node, script_lines))
    record(name + ": backward sites name their forward lines", bool(seen) and not wrong and
           all(seen.get(n) for n in ("AddmmBackward0", "GeluBackward0")), seen={k: sorted(v) for k, v in seen.items()},
           wrong=wrong[:5], want={k: sorted(v) for k, v in want.items()})
    dev = [d for d in rep.get("devices", []) if d.get("allocator") == "pytorch"]
    kinds = (dev[0].get("memory_kinds") or {}).get("at_peak", {}) if dev else {}
    expect = (out.get("outputs") or {}).get("expect", {})
    rel = {k: round(kinds.get(k, 0) / v, 4) if v else None for k, v in expect.items()}
    record(name + ": kinds at the peak within 1% of the hand-computed bytes",
           bool(rel) and all(r is not None and abs(r - 1) <= 0.01 for r in rel.values()), ratio=rel, kinds=kinds,
           expect=expect, attribution=(dev[0].get("backward_attribution") if dev else None))


def check_held_leak(name, script, dump):
    """A report asked for while the program holds 4 blocks of 12 MiB (LINE_LEAK): its leak list
    has them, the program's (owner ""), led by that line; what PyTorch keeps is named apart."""
    line = marker_lines(script)["LEAK"]
    frames = dump.get("frames") or []
    sites = dump.get("sites") or []
    found, kept = [], {}
    for e in (dump.get("leaks") or {}).get("sites", []):
        s = sites[e["site"]] if e.get("site", -1) < len(sites) else {}
        uf = s.get("user_frame")
        f = frames[uf] if isinstance(uf, int) and uf < len(frames) else {}
        at = "%s:%s" % (os.path.basename(f.get("file", "")), f.get("line"))
        if e.get("owner"):
            kept[e["owner"]] = kept.get(e["owner"], 0) + e.get("bytes", 0)
        elif at == "%s:%d" % (script, line):
            found.append(e.get("bytes"))
    record(name + ": a report asked for mid-run lists the held tensors as the program's, at their line",
           sum(found) == 4 * (12 << 20), line=line, program_bytes_at_line=found, kept=kept,
           leaked_bytes=(dump.get("leaks") or {}).get("bytes"))


def check_accounting(name, rep):
    """The driver's used figure at its peak and at exit, split with under 1% unexplained. Where
    the program used managed memory, the driver's figure holds its pages that moved to the device
    and memory the driver keeps for it, which no bucket names: then nothing may be counted twice
    (unexplained above -1%) and the split must say managed memory was used."""
    for d in rep.get("devices", []):
        acc = d.get("device_accounting")
        if not acc:
            continue
        managed = bool(acc.get("managed_used"))
        for when, m in (("peak", acc), ("exit", acc.get("at_exit") or {})):
            used = m.get("driver_used_bytes", 0)
            un = m.get("unexplained_bytes")
            ok = used > 0 and un is not None and (un > -0.01 * used if managed else abs(un) < 0.01 * used)
            record("%s: device accounting at the %s, unexplained %s" %
                   (name, when, "above -1% of used (managed memory)" if managed else "< 1% of used"),
                   ok, used=used, unexplained=un, managed_used=managed,
                   share=round(un / used, 4) if used and un is not None else None, buckets=m.get("buckets"),
                   by_library=m.get("by_library"))
        return
    record(name + ": device accounting present", False)


def run_both(name, script, args, env_extra, lib, artifacts):
    """The workload without and with the preload (its reports kept under `artifacts`), and the
    checks every workload has: the same exit status (0) and the same outputs."""
    plain = run(script, args, env_extra, None)
    keep = os.path.join(artifacts, name) if artifacts else None
    if keep:
        os.makedirs(keep, exist_ok=True)
    att = run(script, args, env_extra, lib, keep=keep)
    ok_rc = plain["rc"] == att["rc"] == 0
    record(name + ": same exit status (0)", ok_rc, plain=plain["rc"], attached=att["rc"],
           stderr=None if ok_rc else att["stderr"][-1500:] + " || plain: " + plain["stderr"][-600:])
    po, ao = plain["out"] or {}, att["out"] or {}
    record(name + ": same outputs", po.get("outputs") is not None and close(po.get("outputs"), ao.get("outputs")),
           plain=po.get("outputs"), attached=ao.get("outputs"))
    return plain, att


def check_unattached(name, script, args, env_extra, lib, artifacts):
    """PyTorch without its native allocator (a stream-ordered backend, a swapped-in allocator):
    the program's outputs and its own view of its memory unchanged, every byte accounted, the
    script's lines in the report, and what the profiler says of PyTorch."""
    plain, att = run_both(name, script, args, env_extra, lib, artifacts)
    po, ao = plain["out"] or {}, att["out"] or {}
    record(name + ": torch.cuda.max_memory_allocated()/memory_allocated() the same",
           po.get("max_memory_allocated") == ao.get("max_memory_allocated") and
           po.get("memory_allocated") == ao.get("memory_allocated"),
           plain=[po.get("max_memory_allocated"), po.get("memory_allocated")],
           attached=[ao.get("max_memory_allocated"), ao.get("memory_allocated")])
    differing = {}
    for label, s in (po.get("samples") or {}).items():
        t = ((ao.get("samples") or {}).get(label) or {}).get("torch") or {}
        differing[label] = {k: [t.get(k), v] for k, v in (s.get("torch") or {}).items() if t.get(k) != v}
    if po.get("samples"):
        record(name + ": torch.cuda.memory_stats() the same as without the profiler at the same moments",
               all(not d for d in differing.values()), samples=list(differing),
               differing={k: dict(list(v.items())[:8]) for k, v in differing.items()})
    pu, au = po.get("peak_used", 0), ao.get("peak_used", 0)
    if pu:
        record(name + ": driver's used memory at the peak within 1%", abs(au - pu) <= 0.01 * pu,
               plain=pu, attached=au, ratio=round(au / pu, 5))
    rep = main_report(att["reports"])
    statuses = [d.get("allocator_status") for d in rep.get("devices", [])]
    warnings = [ln for ln in att["stderr"].splitlines() if "gpumemprof" in ln and "warn" in ln.lower()]
    record(name + ": not attached (nothing to attach to), no warning about it",
           not any(d.get("allocator") == "pytorch" for d in rep.get("devices", [])) and not warnings,
           statuses=statuses, warnings=warnings[:5])
    check_accounting(name, rep)
    hits, n = user_line_sites(rep, script)
    record(name + ": the report names the script's own lines", bool(hits), top_sites=n, script_lines=hits)
    RESULTS.append({"check": name + ": timings", "pass": True, "plain_wall": plain["wall"],
                    "attached_wall": att["wall"]})


def check(name, script, args, env_extra, timed, lib, artifacts):
    plain, att = run_both(name, script, args, env_extra, lib, artifacts)
    po, ao = plain["out"] or {}, att["out"] or {}
    record(name + ": torch.cuda.max_memory_allocated()/memory_allocated() the same",
           po.get("max_memory_allocated") == ao.get("max_memory_allocated") and po.get("max_memory_allocated", 0) > 0,
           plain=[po.get("max_memory_allocated"), po.get("memory_allocated")],
           attached=[ao.get("max_memory_allocated"), ao.get("memory_allocated")])
    pu, au = po.get("peak_used", 0), ao.get("peak_used", 0)
    record(name + ": driver's used memory at the peak within 1%", pu > 0 and abs(au - pu) <= 0.01 * pu,
           plain=pu, attached=au, ratio=round(au / pu, 5) if pu else None)
    differing = {}
    for label, s in (ao.get("samples") or {}).items():
        t, prof = s.get("torch") or {}, s.get("profiler") or {}
        differing[label] = {k: [prof.get(k), v] for k, v in t.items() if prof.get(k) != v}
    record(name + ": every memory_stats key equal to PyTorch's at the same moments",
           bool(differing) and all(not d for d in differing.values()) and all(
               len((s.get("profiler") or {})) >= 122 for s in (ao.get("samples") or {}).values()),
           samples=list(differing), differing={k: dict(list(v.items())[:8]) for k, v in differing.items()})
    rep = main_report(att["reports"])
    dev = [d for d in rep.get("devices", []) if d.get("allocator") == "pytorch"]
    d0 = dev[0] if dev else {}
    check_keys = (d0.get("pytorch_check") or {}).get("differing_keys")
    record(name + ": attached; at exit our keys equal PyTorch's own; every event fitted",
           bool(dev) and check_keys == {} and d0.get("mirror_mismatches") == 0,
           status=d0.get("allocator_status"), differing_at_exit=check_keys, mismatches=d0.get("mirror_mismatches"),
           private_pools=d0.get("private_pools"), program_resets=d0.get("program_resets"))
    check_accounting(name, rep)
    if name == "autograd_lines":
        check_autograd(name, script, rep, ao)
        check_held_leak(name, script, att["dumps"].get("held") or {})
    hits, n = user_line_sites(rep, script)
    record(name + ": the report names the script's own lines", bool(hits), top_sites=n, script_lines=hits)
    res = {"plain_wall": plain["wall"], "attached_wall": att["wall"], "step_ms_plain": median(po.get("step_ms", [])),
           "step_ms_attached": median(ao.get("step_ms", []))}
    # What capture cost and how the caches did (issue 19): the code watcher's share of the Python
    # frames, and the tree's size against the sites it merged into.
    st = rep.get("stacks") or {}
    res["stacks"] = {k: st.get(k) for k in ("captures", "cache_hits", "unique_sites", "tree_nodes", "python_frames",
                                            "python_frames_compared", "python_frames_trusted", "unwind_seconds",
                                            "python_seconds", "intern_seconds")}
    if timed:
        pool = run(script, args, env_extra, lib, torch_mode="pool")
        pm = median((pool["out"] or {}).get("step_ms", []))
        am = res["step_ms_attached"]
        res["step_ms_pool"] = pm
        record(name + ": step time no worse than the pool mode's (1.03x)", am is not None and pm is not None and
               am <= 1.03 * pm, attached_ms=am, pool_ms=pm, plain_ms=res["step_ms_plain"],
               attached_over_plain=round(am / res["step_ms_plain"], 3) if am and res["step_ms_plain"] else None)
    RESULTS.append({"check": name + ": timings", "pass": True, **res})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--artifacts", default=None, help="folder for the reports of the attached runs")
    ap.add_argument("--only", default=None, help="comma-separated workload names")
    ap.add_argument("--bin", default=None, help="the check programs' folder (default: bin/ beside --lib)")
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.bin or os.path.join(os.path.dirname(os.path.abspath(a.lib)), "bin"))
    only = set(a.only.split(",")) if a.only else None
    for name, script, args, env_extra, timed in WORKLOADS:
        if only and name not in only:
            continue
        env_extra = {k: v.replace("{bin}", bin_dir) for k, v in env_extra.items()}
        try:
            if name in UNATTACHED:
                check_unattached(name, script, args, env_extra, os.path.abspath(a.lib), a.artifacts)
            else:
                check(name, script, args, env_extra, timed, os.path.abspath(a.lib), a.artifacts)
        except Exception as e:  # noqa: BLE001 - one workload's failure must not hide the others
            record(name + ": ran", False, error=repr(e))
        with open(a.out, "w") as f:
            json.dump(RESULTS, f, indent=1)
    failed = [r["check"] for r in RESULTS if not r["pass"]]
    print("%d checks, %d failed" % (len(RESULTS), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
