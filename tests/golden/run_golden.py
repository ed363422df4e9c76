#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Golden test for the stack reports: run prog_golden under LD_PRELOAD=libgpumemprof.so on the
# simulated device and check, by value, the line-profile trees, the peak attribution, the leak list,
# the OOM entry and the folded files. Expected numbers are worked out in prog_golden.cpp's header.
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from preload_env import asan_runtime_from_env, preload_env  # noqa: E402

MIB = 1 << 20


def site_lines(source):
    lines = {}
    with open(source) as f:
        for n, text in enumerate(f, 1):
            m = re.search(r"@site:(\w+)", text)
            if m:
                lines[m.group(1)] = n
    return lines


def tree(txt, title):
    """The tree of a line-profile section, from its _root line."""
    sec = section(txt, title)
    i = sec.find("_root (")
    return sec[i:] if i >= 0 else ""


def section(txt, title):
    """Text between '== title ==' and the next '== ' heading."""
    start = txt.find("== %s ==" % title)
    if start < 0:
        return ""
    start = txt.find("\n", start) + 1
    end = txt.find("\n== ", start)
    return txt[start:] if end < 0 else txt[start:end + 1]


def tree_line(tree, file_suffix, line, func):
    """The tree line for `file:line:[scope::]func...`, as (indent, used, acquired), or None. The
    scope is optional: DWARF gives inlined functions with internal linkage no qualified name."""
    pat = re.compile(r"^( *)(\S*%s):%d:((?:[^\n]*::)?%s[^\n]*) \(([^,]+), ([^)]+)\)$" %
                     (re.escape(file_suffix), line, re.escape(func)), re.M)
    m = pat.search(tree)
    return (len(m.group(1)), m.group(4), m.group(5)) if m else None


def golden_env(a, tmp, extra=None):
    """prog_golden's environment: the preload on the simulated 64 MiB device, outputs <tmp>/golden.*,
    then `extra`. -Db_sanitize=address: the instrumented library needs the ASan runtime loaded
    first; meson passes its path (tests/meson.build, default test setup)."""
    return preload_env(a.sim_dir, a.preload, asan_runtime=asan_runtime_from_env(), clean=False,
                       output=os.path.join(tmp, "golden"),
                       extra=dict({"SIMCUDA_CAPACITY": "64M", "GPUMEMPROF_STACK_DEPTH": "64"}, **(extra or {})))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preload", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--sim-dir", required=True)
    a = ap.parse_args()
    L = site_lines(a.source)
    src = os.path.basename(a.source)
    failures = []

    def check(what, cond, detail=""):
        print("  %s %s%s" % ("ok  " if cond else "FAIL", what, "" if cond else "  " + str(detail)))
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        env = golden_env(a, tmp)
        p = subprocess.run([a.prog], env=env, capture_output=True, text=True, timeout=60)
        print(p.stdout, end="")
        check("program exits 0", p.returncode == 0, p.stderr[-2000:])
        check("program saw the OOM", "oom_code=2" in p.stdout, p.stdout)
        txts = glob.glob(os.path.join(tmp, "golden*.txt"))
        check("one .txt report", len(txts) == 1, os.listdir(tmp))
        if len(txts) != 1:
            return finish(failures)
        base = txts[0][:-4]
        txt = open(txts[0]).read()
        folded = open(base + ".folded").read() if os.path.exists(base + ".folded") else ""
        alloc_folded = open(base + ".alloc.folded").read() if os.path.exists(base + ".alloc.folded") else ""

        # Peak: 8 + 2 + 4 MiB live together = 14 MiB = 14680064 bytes.
        check("process-wide peak 14 MiB", "process-wide peak of live bytes (all devices): 14.00 MiB (14680064 bytes)" in txt)

        cum = tree(txt, "Line profile, cumulative (used_bytes, acquired_bytes)")
        peak = tree(txt, "Line profile at the peak (live_bytes, acquired_bytes)")
        # Cumulative: used = everything handed out: 8 + 2 + 4 + 1 MiB = 15 MiB. Acquired: the
        # 8 MiB request opens a 20 MiB large segment (PyTorch: 1 MiB < size <= 10 MiB -> 20 MiB);
        # 2 and 4 MiB are split from it; the 1 MiB temp (small pool) opens a 2 MiB segment; the 1 GiB
        # request acquires nothing. Total 22 MiB.
        check("cumulative _root", cum.startswith("_root (15.00MB, 22.00MB)\n"), cum[:200])
        w = tree_line(cum, src, L["weights"], "alloc_weights")
        check("cumulative weights line (8 MiB used, 20 MiB acquired)", w is not None and w[1:] == ("8.00MB", "20.00MB"), w)
        mw = tree_line(cum, src, L["main_weights"], "main")
        check("main -> alloc_weights nesting", mw is not None and w is not None and w[0] == mw[0] + 2, (mw, w))
        s = tree_line(cum, src, L["inline_scratch"], "alloc_inline_scratch")
        sc = tree_line(cum, src, L["step_calls_inline"], "step")
        check("inlined helper line (4 MiB, 0)", s is not None and s[1:] == ("4.00MB", "0.00B"), s)
        check("inlined helper nested under its caller's call line", s is not None and sc is not None and s[0] == sc[0] + 2,
              (sc, s))
        th = tree_line(cum, src, L["thread"], "worker")
        check("thread line (2 MiB, 0)", th is not None and th[1:] == ("2.00MB", "0.00B"), th)
        tp = tree_line(cum, src, L["temp"], "main")
        check("temp line (1 MiB used, 2 MiB acquired)", tp is not None and tp[1:] == ("1.00MB", "2.00MB"), tp)
        check("no profiler or cudart frames in the tree",
              "libgpumemprof" not in cum and "libcudart" not in cum and "cudaMalloc" not in cum)

        # At the peak: 14 MiB live; acquired so far 20 MiB (the temp's segment came later).
        check("at-peak _root", peak.startswith("_root (14.00MB, 20.00MB)\n"), peak[:200])
        w = tree_line(peak, src, L["weights"], "alloc_weights")
        check("at-peak weights 8 MiB", w is not None and w[1] == "8.00MB", w)
        s = tree_line(peak, src, L["inline_scratch"], "alloc_inline_scratch")
        check("at-peak scratch 4 MiB", s is not None and s[1] == "4.00MB", s)
        th = tree_line(peak, src, L["thread"], "worker")
        check("at-peak thread 2 MiB", th is not None and th[1] == "2.00MB", th)
        check("temp absent at the peak", tree_line(peak, src, L["temp"], "main") is None)

        top = section(txt, "Top call sites by bytes live at the peak")
        check("top site #1 is the weights line",
              re.search(r"^#1 8\.00 MiB \(8388608 bytes\) live at the peak in 1 block\n    at \S*%s:%d:" %
                        (re.escape(src), L["weights"]), top, re.M) is not None, top[:400])

        leaks = section(txt, "Leaks at exit (live blocks grouped by call site)")
        check("exactly one leak entry, 8 MiB in 1 block at the weights line",
              re.match(r"#1 8\.00 MiB \(8388608 bytes\) leaked in 1 block\n    at \S*%s:%d:" %
                       (re.escape(src), L["weights"]), leaks) is not None and "#2 " not in leaks, leaks[:400])

        ooms = section(txt, "Out-of-memory events")
        check("one OOM of 1 GiB", "OOM #1 on device 0: request of 1024.00 MiB (1073741824 bytes)" in ooms and
              "OOM #2" not in ooms, ooms[:400])
        check("OOM stack starts at the failing line",
              re.search(r"^    at \S*%s:%d:main" % (re.escape(src), L["oom"]), ooms, re.M) is not None, ooms[:600])
        check("OOM in PyTorch's shape", "CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total "
              "capacity of 64.00 MiB" in ooms, ooms[:600])
        check("OOM suggestion present", "  suggestion: " in ooms)

        # Folded, root first: ...;main (prog_golden.cpp:M);alloc_weights() (prog_golden.cpp:W) 8388608
        def folded_has(text, parts, value):
            pat = ";".join(re.escape(x) for x in parts) + " %d$" % value
            return re.search(pat, text, re.M) is not None

        ns = "(anonymous namespace)::"
        wt = ["main (%s:%d)" % (src, L["main_weights"]), ns + "alloc_weights() (%s:%d)" % (src, L["weights"])]
        st = ["main (%s:%d)" % (src, L["main_step"]), ns + "step() (%s:%d)" % (src, L["step_calls_inline"]),
              "alloc_inline_scratch (%s:%d)" % (src, L["inline_scratch"])]
        check("folded: weights 8388608 at the peak", folded_has(folded, wt, 8 * MIB), folded)
        check("folded: inlined scratch 4194304 at the peak", folded_has(folded, st, 4 * MIB), folded)
        check("folded: thread 2097152 at the peak",
              re.search(r"worker\(\) \(%s:%d\) %d$" % (re.escape(src), L["thread"], 2 * MIB), folded, re.M) is not None)
        check("folded: exactly 3 stacks at the peak, summing to 14 MiB",
              len(folded.splitlines()) == 3 and sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()) == 14 * MIB,
              folded)
        check("alloc.folded: temp 1048576 in total",
              re.search(r"main \(%s:%d\) %d$" % (re.escape(src), L["temp"], MIB), alloc_folded, re.M) is not None,
              alloc_folded)
    return finish(failures)


def finish(failures):
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
