# SPDX-License-Identifier: MIT
"""GPU checks of issue 8 (Python frames, zero configuration, the gpumemprof package), called by
gpu_check.py (--only python). `run` and `record` are gpu_check's."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def marked_line(path, pattern):
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if pattern in text:
                return n
    raise KeyError(pattern)


def site_frames(report, i):
    return report["sites"][i]["frames"]


def py_lines(frames, base):
    """(line, function) of the frames in file `base` (Python frames), root first."""
    return [(f["line"], f["function"]) for f in frames if f.get("kind") == "python" and f["file"].endswith(base)]


def check_torch_python_lines(run, record, lib, steps):
    """LD_PRELOAD alone (no PYTORCH_NO_CUDA_MEMORY_CACHING from us): the PyTorch loop's report
    names the script's own forward, loss and optimizer-step lines among its top sites and in the tree."""
    script = os.path.join(HERE, "torch_loop.py")
    env = {"STEPS": str(steps), "PYTHONUNBUFFERED": "1", "GPUMEMPROF_HTML": "0"}
    saved = os.environ.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)  # the library must set it itself
    try:
        r = run([sys.executable, script], env, preload=lib)
    finally:
        if saved is not None:
            os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = saved
    if r["rc"] != 0 or not r["reports"]:
        record("py_torch_script_lines", False, rc=r["rc"], stderr=r["stderr"])
        return
    rep = r["reports"][-1]
    lines = {"forward": marked_line(script, "out = model(x)"),
             "loss": marked_line(script, "loss = nn.functional.cross_entropy"),
             "backward": marked_line(script, "loss.backward()"),
             "step": marked_line(script, "opt.step()")}
    record("py_zero_config_sets_torch_variable",
           "PYTORCH_NO_CUDA_MEMORY_CACHING=1" in rep.get("framework_env", []) and r["out"] and not r["out"]["caching"],
           framework_env=rep.get("framework_env"))
    # Top 10 sites by total bytes, and the sites at the peak.
    order = sorted(range(len(rep["sites"])), key=lambda i: -rep["sites"][i]["total_bytes"])[:10]
    peak_order = [s["site"] for s in rep["peak"]["sites"][:10]]
    found = {}
    for name, line in lines.items():
        hits = [i for i in order + peak_order if any(l == line for l, _ in py_lines(site_frames(rep, i), "torch_loop.py"))]
        found[name] = len(hits)
    backward_label = sum(1 for s in rep["sites"] if any(f["function"] == "[autograd backward]" for f in s["frames"]))
    st = rep.get("stacks", {})
    txt_path = os.path.join(r["dir"], "prof-%d.txt" % rep["pid"])
    txt = open(txt_path).read() if os.path.exists(txt_path) else ""
    in_tree = {n: ("torch_loop.py:%d:main (" % l) in txt for n, l in lines.items()}
    record("py_torch_top_sites_name_forward_loss_step",
           found["forward"] > 0 and found["loss"] > 0 and found["step"] > 0,
           top_sites_with_line=found, lines=lines, backward_sites_labelled=backward_label,
           python_captures=st.get("python_captures"), captures=st.get("captures"),
           python_frames_per_capture=round(st.get("python_frames", 0) / max(st.get("python_captures", 0), 1), 1))
    record("py_torch_tree_names_forward_loss_step", in_tree["forward"] and in_tree["loss"] and in_tree["step"],
           in_tree=in_tree)


def check_framework_lines(run, record, lib):
    prog = os.path.join(HERE, "python_programs.py")
    for fw, mark in (("cupy", "@line:cupy_alloc"), ("jax", "@line:jax_alloc")):
        r = run([sys.executable, prog, fw], {"GPUMEMPROF_HTML": "0"}, preload=lib)
        if r["rc"] != 0 or not r["reports"]:
            record("py_%s_lines" % fw, False, rc=r["rc"], stderr=r["stderr"])
            continue
        rep = r["reports"][-1]
        line = marked_line(prog, mark)
        sites = [s for s in rep["sites"] if any(l == line for l, _ in py_lines(s["frames"], "python_programs.py"))]
        record("py_%s_report_names_its_line" % fw, len(sites) > 0 and sum(s["total_bytes"] for s in sites) >= 4 * (32 << 20),
               line=line, sites=len(sites), bytes=sum(s["total_bytes"] for s in sites),
               framework_env=rep.get("framework_env"))


def check_snapshot_viz(run, record, lib):
    prog = os.path.join(HERE, "python_programs.py")
    r = run([sys.executable, prog, "viz"], {"GPUMEMPROF_PYTHON_PACKAGE": os.path.join(REPO, "python")}, preload=lib)
    out = r["out"] or {}
    record("py_snapshot_loads_in_torch_memory_viz",
           r["rc"] == 0 and out.get("segment_plot_bytes", 0) > 0 and out.get("trace_plot_bytes", 0) > 0 and
           out.get("python_frames_in_blocks", 0) > 0, **out, stderr=r["stderr"][-1500:] if r["rc"] else "")


def check_python_ab(run, record, lib, steps, runs):
    """Stacks with Python frames vs stacks off, alternate steps of one process (1.15x)."""
    script = os.path.join(HERE, "torch_loop.py")
    ratios = []
    for _ in range(runs):
        r = run([sys.executable, script], {"STEPS": str(steps), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
                                           "AB_STACK_DEPTH": "64", "GPUMEMPROF_PYTHON": "1", "GPUMEMPROF_HTML": "0"},
                preload=lib)
        ab = r["out"].get("stacks_ab") if r["out"] else None
        if r["rc"] != 0 or not ab:
            record("py_stacks_with_python_ab_1.15x", False, rc=r["rc"], stderr=r["stderr"])
            return
        st = r["reports"][-1].get("stacks", {}) if r["reports"] else {}
        ratios.append((ab["ratio"], st.get("python_captures", 0), st.get("captures", 0)))
    ratios.sort()
    med = ratios[len(ratios) // 2]
    record("py_stacks_with_python_ab_1.15x", med[0] <= 1.15 and med[1] > 0, median_ratio=round(med[0], 3),
           runs=[{"ratio": round(x, 3), "python_captures": p, "captures": c} for x, p, c in ratios])


def check_all(run, record, lib, steps, ab_steps, ab_runs):
    check_torch_python_lines(run, record, lib, steps)
    check_framework_lines(run, record, lib)
    check_snapshot_viz(run, record, lib)
    check_python_ab(run, record, lib, ab_steps, ab_runs)
