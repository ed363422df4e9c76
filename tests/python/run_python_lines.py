#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Runs prog_lines.py under one Python interpreter with LD_PRELOAD=libgpumemprof.so on the
# simulated device and checks, by value, that the report names the program's own lines:
# the line-profile tree (file:line:function, used and acquired bytes, nesting), the JSON sites'
# Python frames ("kind": "python") and the folded file. With --expect-fallback the interpreter
# is one the profiler cannot read: one warning, native stacks, same byte totals.
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "prog_lines.py")
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
from run_golden import section, site_lines  # noqa: E402  (the .txt's sections, @site: markers)
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
from exit_json import load_report  # noqa: E402
from preload_env import asan_runtime_from_env, preload_env  # noqa: E402
from checks import Checks  # noqa: E402
from python_args import parse_python_args  # noqa: E402


class Node:
    def __init__(self, label, used, acquired, parent):
        self.label, self.used, self.acquired, self.parent = label, used, acquired, parent
        self.children = []


def parse_tree(text):
    """The CuPy-format tree (from its _root line) as Nodes."""
    root, stack = None, []
    for line in text.splitlines():
        m = re.match(r"^( *)(.*) \(([^,()]+), ([^()]+)\)$", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        if root is None:
            if m.group(2) != "_root":
                continue
            root = Node("_root", m.group(3), m.group(4), None)
            stack = [root]
            continue
        if depth < 1 or depth > len(stack):
            continue
        del stack[depth:]
        n = Node(m.group(2), m.group(3), m.group(4), stack[-1])
        stack[-1].children.append(n)
        stack.append(n)
    return root


def find_path(node, steps):
    """Follows `steps` [(file_basename, line, func)...] from node, each step a direct child;
    a step func may be a tuple of accepted alternatives, and a step may be marked optional with
    line=None meaning 'skip one child whose label matches func if present'. Returns the last node."""
    cur = node
    for base, line, func in steps:
        nxt = None
        for c in cur.children:
            if re.fullmatch(r".*/%s:%d:%s" % (re.escape(base), line, re.escape(func)), c.label):
                nxt = c
                break
        if nxt is None:
            return None
        cur = nxt
    return cur


def main():
    a = parse_python_args(lambda ap: ap.add_argument("--expect-fallback", action="store_true"))
    if a is None:
        return 77
    L = site_lines(PROG)
    check = Checks()
    failures = check.failures

    version = subprocess.run([a.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
    print("interpreter %s (Python %s)" % (a.python, version))
    with tempfile.TemporaryDirectory() as tmp:
        # The interpreter under test must not see this one's PYTHON* settings.
        asan = asan_runtime_from_env()
        env = {k: v for k, v in preload_env(a.sim_dir, a.lib, asan, output=os.path.join(tmp, "out"),
                                            leak_check=False).items() if not k.startswith("PYTHON")}
        p = subprocess.run([a.python, PROG], env=env, capture_output=True, text=True, timeout=120)
        # The same program forking a child that allocates: the child's own report names its line.
        # Not under ASan: GCC 12's ASan runtime takes no lock of its allocator around fork(), and
        # a child once hung at its first malloc on an allocator lock the parent's other threads
        # held at the fork (seen in the ASan stage, 1 run in many); glibc's malloc is fork-safe.
        fork_env = dict(env, GPUMEMPROF_OUTPUT=os.path.join(tmp, "fork-%p"))
        pf = None if asan else subprocess.run([a.python, PROG, "--fork"], env=fork_env, capture_output=True,
                                              text=True, timeout=120)
        check("program exits 0 and allocated 7 blocks", p.returncode == 0 and "allocated=7" in p.stdout,
              (p.returncode, p.stdout, p.stderr[-2000:]))
        warnings = [l for l in p.stderr.splitlines() if "cannot read this Python" in l]
        txt_path = os.path.join(tmp, "out.txt")
        if not os.path.exists(txt_path):
            check("report written", False, os.listdir(tmp))
            return 1
        txt = open(txt_path).read()
        report = load_report(os.path.join(tmp, "out.json"))
        folded = open(os.path.join(tmp, "out.alloc.folded")).read()
        tree = parse_tree(section(txt, "Line profile, cumulative (used_bytes, acquired_bytes)"))
        check("tree parsed", tree is not None)
        if tree is None:
            return 1
        # 3 + 5 + 1 + 1 + 6 + 7 + 4 MiB handed out; acquired: the 3 MiB request opens a 20 MiB
        # large segment that 5 and 6 MiB also fit in; the first 1 MiB opens a 2 MiB small segment
        # that the second fills; 7 MiB does not fit the first large segment (14 MiB used): another
        # 20, which the 4 MiB fits in after it.
        check("_root (27.00MB, 42.00MB)", (tree.used, tree.acquired) == ("27.00MB", "42.00MB"),
              (tree.used, tree.acquired))
        py_frames = [f for s in report.get("sites", []) for f in s["frames"] if f.get("kind") == "python"]
        if a.expect_fallback:
            check("exactly one 'cannot read this Python' warning", len(warnings) == 1, p.stderr[-2000:])
            check("no Python frames in the JSON sites", not py_frames, py_frames[:3])
            check("no Python file:line in the tree", "prog_lines.py:" not in txt)
            check("native frames still there (the interpreter's eval loop)", "_PyEval_EvalFrameDefault" in txt)
            return 1 if failures else 0

        check("no warning", not warnings, warnings)
        src = "prog_lines.py"
        module = find_path(tree, [(src, L["module"], "<module>")])
        check("tree starts at prog_lines.py:%d:<module> (21.00MB, 42.00MB)" % L["module"],
              module is not None and (module.used, module.acquired) == ("21.00MB", "42.00MB"),
              [c.label for c in tree.children])
        if module is None:
            return 1

        def chain(name, steps, used, acquired):
            n = find_path(module, steps)
            check("%s: %s (%s, %s)" % (name, " -> ".join("%d:%s" % (l, f) for _, l, f in steps), used, acquired),
                  n is not None and (n.used, n.acquired) == (used, acquired),
                  None if n is None else (n.label, n.used, n.acquired))
            return n

        m = chain("nested functions",
                  [(src, L["main_outer"], "main"), (src, L["outer"], "outer"), (src, L["inner"], "inner"),
                   (src, L["malloc"], "malloc")], "3.00MB", "20.00MB")
        if m is not None:
            check("CDLL call: below malloc only ctypes' native frames, no interpreter frames",
                  all("_PyEval" not in c.label and "python3" not in c.label for c in m.children),
                  [c.label for c in m.children])
        chain("method", [(src, L["main_method"], "main"), (src, L["method"], "Model.forward"),
                         (src, L["malloc"], "malloc")], "5.00MB", "0.00B")
        comp = find_path(module, [(src, L["main_comprehension"], "main"), (src, L["comprehension"], "comprehension")])
        # 3.11 runs a comprehension as a function of its own; 3.12 inlines it (PEP 709).
        inner = None
        if comp is not None:
            inner = find_path(comp, [(src, L["malloc"], "malloc")]) or find_path(
                comp, [(src, L["comprehension"], "comprehension.<locals>.<listcomp>"), (src, L["malloc"], "malloc")])
        check("comprehension: %d:comprehension -> malloc (2.00MB, 2.00MB)" % L["comprehension"],
              inner is not None and (inner.used, inner.acquired) == ("2.00MB", "2.00MB"),
              None if comp is None else [c.label for c in comp.children])
        chain("PyDLL (GIL held)", [(src, L["main_pydll"], "main"), (src, L["pydll"], "with_gil"),
                                   (src, L["malloc"], "malloc")], "7.00MB", "20.00MB")
        # Python -> qsort -> Python: libc's qsort frames between the two Python frames.
        q = find_path(module, [(src, L["main_callback"], "main"), (src, L["qsort"], "from_native_callback")])
        cb = None
        between = []
        if q is not None:
            stack = [(q, [])]
            while stack:
                x, path = stack.pop()
                if re.fullmatch(r".*/prog_lines\.py:%d:from_native_callback\.<locals>\.compare" % L["callback"], x.label):
                    cb, between = x, path
                for c in x.children:
                    stack.append((c, path + [x.label]))
        check("native callback: from_native_callback -> qsort (native) -> compare (4.00MB, 0.00B)",
              cb is not None and (cb.used, cb.acquired) == ("4.00MB", "0.00B") and
              any("qsort" in l for l in between[1:]) and
              not any("prog_lines.py" in l for l in between[1:]),
              (None if cb is None else (cb.used, cb.acquired), between))
        # The thread's tree starts at threading's bootstrap (its own root, beside <module>).
        worker = None
        for top in tree.children:
            if "Thread._bootstrap" in top.label:
                n = find_path(top, [("threading.py", int(top.label.split(":")[-2]), "Thread._bootstrap")]) or top
                stack = [top]
                while stack:
                    x = stack.pop()
                    if re.fullmatch(r".*/prog_lines\.py:%d:worker" % L["thread"], x.label):
                        worker = x
                    stack.extend(x.children)
        check("threading.Thread: Thread._bootstrap ... -> %d:worker (6.00MB, 0.00B)" % L["thread"],
              worker is not None and (worker.used, worker.acquired) == ("6.00MB", "0.00B") and
              worker.parent is not None and "Thread.run" in worker.parent.label,
              [c.label for c in tree.children])
        # (As function names: a checkout's path may hold the same letters, say /tmp/ci_clone3.)
        startup = re.findall(r"\b(?:__libc_start_main|start_thread|clone3)\b", txt)
        check("libc start-up frames not in the tree", not startup, startup[:3])
        top = section(txt, "Top call sites by total bytes allocated")
        # Sites are grouped by the innermost line of the user's own code: every allocation here is
        # made by the helper prog_lines.py:malloc, so its 6 call stacks are one entry (27 MiB in 7
        # blocks), shown by its largest stack (7 MiB, from with_gil).
        check("top entry: the helper prog_lines.py:%d:malloc, its 6 call stacks grouped" % L["malloc"],
              re.search(r"^#1 27\.00 MiB \(28311552 bytes\) allocated in 7 blocks from 6 call stacks\n"
                        r"    at \S*prog_lines\.py:%d:malloc\n"
                        r"    from \S*prog_lines\.py:%d:with_gil\n" % (L["malloc"], L["pydll"]), top, re.M)
              is not None, top[:600])
        check("JSON sites carry Python frames with kind=python, file, line, function",
              any(f["file"].endswith(src) and f["line"] == L["inner"] and f["function"] == "inner"
                  for f in py_frames), py_frames[:5])
        check("folded file carries Python frames",
              re.search(r"<module> \(prog_lines\.py:%d\);main \(prog_lines\.py:%d\);with_gil \(prog_lines\.py:%d\)" %
                        (L["module"], L["main_pydll"], L["pydll"]), folded) is not None, folded[:800])
        # The child's report (it keeps the parent's call-site totals; the parent's has no such site).
        child_sites = []
        for path in glob.glob(os.path.join(tmp, "fork-*.json")):
            for site in load_report(path).get("sites", []):
                if any(f.get("kind") == "python" and f["line"] == L["fork_child"] and f["function"] == "forked"
                       for f in site["frames"]):
                    child_sites.append(site)
        if pf is None:
            print("  skip fork: the child's report (not under ASan, see above)")
        else:
            check("fork: the child's report names prog_lines.py:%d:forked for its 2 MiB" % L["fork_child"],
                  pf.returncode == 0 and [s["total_bytes"] for s in child_sites] == [2 << 20],
                  (pf.returncode, pf.stderr[-1500:], [s["total_bytes"] for s in child_sites]))
        check("report says Python frames were found in all 7 stacks",
              "Python frames: found in 7 stacks" in txt, "")
        # The comprehension's second allocation repeats the first one's Python stack (malloc,
        # comprehension, main, <module>; 3.11 adds <listcomp>): 3.12+ takes those frames by
        # comparing them with the capture before (3.11 only where functions have versions).
        st = report.get("stacks", {})
        compared, kept = st.get("python_frames_compared", -1), st.get("python_frames", 0)
        check("Python frames compared: %d of %d kept" % (compared, kept),
              (4 if version not in ("3.11",) else 0) <= compared <= kept, st)
        check("the .txt splits out the Python frames' time", "of which Python frames" in txt, "")
        # The tree holds at least every frame of the deepest stack (one node a frame).
        deepest = max(len(s["frames"]) for s in report["sites"])
        check("stacks.tree_nodes (%s) at least the deepest site's %d frames" % (st.get("tree_nodes"), deepest),
              st.get("tree_nodes", 0) >= deepest, st)
        # What share of them the compare pass took, and took on the code watcher's word (3.12+).
        want = "%.0f%% taken from the thread's previous stack, %.0f%% without reading their code objects" % (
            100.0 * compared / kept if kept else 0, 100.0 * st.get("python_frames_trusted", 0) / kept if kept else 0)
        check("the .txt gives the compared and trusted shares of the JSON's counts (%s)" % want, want in txt,
              [l for l in txt.splitlines() if l.startswith("Python frames")])
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
