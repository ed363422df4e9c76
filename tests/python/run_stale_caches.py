#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Runs prog_stale.py under one Python interpreter with LD_PRELOAD=libgpumemprof.so on the
# simulated device and checks, by value, that every allocation was put under the stack it was
# made from, in the patterns where a cache of stacks (the thread's previous capture, the code
# objects met at each depth, the shared stack cache) would give a stale one: another line of the
# same function, another caller, a code object made at a freed one's address, a new thread on the
# previous thread's stack memory. Each site is identified by its innermost Python frames; sizes
# differ per line, so a stack taken from the wrong allocation shows as wrong sums.
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "prog_stale.py")
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
from run_golden import site_lines  # noqa: E402  (@site: markers)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from exit_json import load_report  # noqa: E402
from preload_env import asan_runtime_from_env, preload_env  # noqa: E402
from checks import Checks  # noqa: E402
from python_args import parse_python_args  # noqa: E402

KIB = 1024


def main():
    a = parse_python_args()
    if a is None:
        return 77
    L = site_lines(PROG)
    check = Checks()
    failures = check.failures

    def one_run(fill, watcher=True, restore=False):
        """The program once; with `fill`, it takes every code watcher slot first (3.12+); without
        `watcher`, the profiler is told to add none (GPUMEMPROF_CODE_WATCHER=0); with `restore`
        (3.11), it puts PyCode_Type's own deallocator back over the profiler's wrapper."""
        with tempfile.TemporaryDirectory() as tmp:
            # The interpreter under test must not see this one's PYTHON* settings.
            extra = {"GPUMEMPROF_HTML": "0", "GPUMEMPROF_PICKLE": "0",
                     "GPUMEMPROF_CODE_WATCHER": "1" if watcher else "0"}
            env = preload_env(a.sim_dir, a.lib, asan_runtime_from_env(), output=os.path.join(tmp, "out"),
                              leak_check=False, extra=extra)
            env = {k: v for k, v in env.items() if not k.startswith("PYTHON")}
            argv = [a.python, PROG, os.path.join(tmp, "sub.json")] + (["--fill-watchers"] if fill else []) + \
                (["--restore-dealloc"] if restore else [])
            p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
            check("program exits 0", p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
            if p.returncode != 0:
                return
            did = json.loads(p.stdout.strip().splitlines()[-1])
            report = load_report(os.path.join(tmp, "out.json"))

        rounds = did["rounds"]
        # (innermost Python frame, the one above it) -> [allocations, requested bytes], summed over sites.
        by_inner = collections.defaultdict(lambda: [0, 0])
        by_pair = collections.defaultdict(lambda: [0, 0])
        for s in report["sites"]:
            py = [(f["function"], f["line"]) for f in s["frames"] if f.get("kind") == "python"]
            if not py:
                continue
            for key, table in ((py[-1], by_inner), (tuple(py[-2:]), by_pair)):
                table[key][0] += s["total_count"]
                table[key][1] += s["requested_bytes"]

        def sums(table, key, count, size, what):
            got = table.get(key, [0, 0])
            check("%s: %d allocations of %d KiB under %s" % (what, count, size // KIB, key),
                  got == [count, count * size], got)

        sums(by_inner, ("two_lines", L["line_a"]), rounds, 101 * KIB, "another line of the same function")
        sums(by_inner, ("two_lines", L["line_b"]), rounds, 102 * KIB, "another line of the same function")
        sums(by_pair, (("caller_1", L["caller_1"]), ("leaf", L["leaf"])), rounds, 111 * KIB, "another caller")
        sums(by_pair, (("caller_2", L["caller_2"]), ("leaf", L["leaf"])), rounds, 112 * KIB, "another caller")
        check("code objects were made at freed ones' addresses (%d of %d)" % (did["reused_code_addresses"], rounds),
              did["reused_code_addresses"] > 0, "the scenario did not happen: nothing was tested")
        wrong = []
        for g in did["generated"]:
            got = by_inner.get((g["name"], g["line"]), [0, 0])
            if got != [1, g["bytes"]]:
                wrong.append((g["name"], g["line"], got))
        check("each generated function's allocation under its own name and line (%d)" % len(did["generated"]),
              not wrong, wrong[:5])
        gen_total = sum(v[0] for k, v in by_inner.items() if k[0].startswith("gen_"))
        check("no other allocation under a generated function", gen_total == rounds, gen_total)
        if did["subinterpreter"] is not None:  # (3.12+)
            check("subinterpreter: code objects were made at freed ones' addresses (%d of %d)"
                  % (did["reused_sub_addresses"], rounds), did["reused_sub_addresses"] > 0,
                  "the scenario did not happen: nothing was tested")
            wrong = [(g["name"], g["line"], by_inner.get((g["name"], g["line"]))) for g in did["subinterpreter"]
                     if by_inner.get((g["name"], g["line"]), [0, 0]) != [1, g["bytes"]]]
            check("subinterpreter: each generated function's allocation under its own name and line (%d)"
                  % len(did["subinterpreter"]), not wrong, wrong[:5])
        check("function objects were made where the one before was (%d of %d)" % (did["reused_functions"], rounds - 1),
              did["reused_functions"] > 0, "the scenario did not happen: nothing was tested")
        calls = did["function_calls"]
        wrong = [(f["name"], f["line"], by_inner.get((f["name"], f["line"])))
                 for f in did["functions"] if by_inner.get((f["name"], f["line"]), [0, 0]) != [calls, calls * f["bytes"]]]
        check("each function's %d allocations under its own name and line (%d)" % (calls, len(did["functions"])),
              not wrong, wrong[:5])
        fn_total = sum(v[0] for k, v in by_inner.items() if k[0].startswith("fn_"))
        check("no other allocation under one of those functions", fn_total == rounds * calls, fn_total)
        check("new threads got a previous thread's stack memory (%d of %d)" % (did["reused_thread_stacks"], rounds),
              did["reused_thread_stacks"] > 0, "the scenario did not happen: nothing was tested")
        sums(by_inner, ("thread_a", L["thread_a"]), rounds // 2, 121 * KIB, "a new thread on an old one's stack")
        sums(by_inner, ("thread_b", L["thread_b"]), rounds // 2, 122 * KIB, "a new thread on an old one's stack")
        sums(by_pair, (("drive_1", L["drive_1"]), ("generator_alloc", L["gen_alloc"])), rounds, 131 * KIB,
             "a generator resumed from another caller")
        sums(by_pair, (("drive_2_inner", L["drive_2"]), ("generator_alloc", L["gen_alloc"])), rounds, 132 * KIB,
             "a generator resumed from another caller")
        # The same Python frames over other native frames: glue_leaf called back by qsort, then by
        # bsearch, both called from one line. Each allocation's stack names the libc function
        # that called back, and only that one.
        def libc_callers(site):
            names = [f.get("function") or "" for f in site["frames"] if f.get("kind") != "python"]
            return ("qsort" if any("qsort" in n or "msort" in n for n in names) else "") + \
                ("bsearch" if any(n == "bsearch" for n in names) else "")
        glued = collections.defaultdict(lambda: [0, 0])
        for site in report["sites"]:
            py = [(f["function"], f["line"]) for f in site["frames"] if f.get("kind") == "python"]
            if py[-2:] == [("through", L["through"]), ("glue_leaf", L["glue_leaf"])]:
                glued[libc_callers(site)][0] += site["total_count"]
                glued[libc_callers(site)][1] += site["requested_bytes"]
        for name, size in (("qsort", 151 * KIB), ("bsearch", 152 * KIB)):
            n = did["glued"][name]
            check("the same Python frames over other native frames: %d allocations of %d KiB under %s's frames alone"
                  % (n, size // KIB, name), n > 0 and glued.get(name) == [n, n * size], dict(glued))
        # The recursion: how many recurse frames each allocation's stack has, by size.
        depths = collections.defaultdict(lambda: [0, 0])
        for s in report["sites"]:
            py = [(f["function"], f["line"]) for f in s["frames"] if f.get("kind") == "python"]
            if py and py[-1] == ("recurse", L["recurse_leaf"]):
                calls = sum(1 for f in py if f == ("recurse", L["recurse_call"]))
                depths[calls + 1][0] += s["total_count"]
                depths[calls + 1][1] += s["requested_bytes"]
        for depth, size in ((3, 141 * KIB), (5, 142 * KIB)):
            check("a chain of another length: %d allocations of %d KiB %d calls deep" % (rounds, size // KIB, depth),
                  depths.get(depth) == [rounds, rounds * size], dict(depths))
        st = report.get("stacks", {})
        trusted = st.get("python_frames_trusted", 0)
        # (3.12+ a code watcher counts destroyed code objects, 3.11 PyCode_Type's deallocator.)
        if not watcher:
            check("GPUMEMPROF_CODE_WATCHER=0: no frame taken on the count of destroyed code objects",
                  trusted == 0, trusted)
        elif restore:
            check("the profiler's wrapper was in PyCode_Type's deallocator slot", did["dealloc_wrapped"] is True,
                  did["dealloc_wrapped"])
            check("no frame taken on the count once the slot lost the wrapper", trusted == 0, trusted)
        elif not fill:
            check("the compare pass took frames on the count of destroyed code objects (%d)" % trusted, trusted > 0,
                  "the count was not used: the fast compare was not tested")
        elif did["watchers"] is not None:
            check("all 8 code watcher slots the program's, with ids 0-7, none left after: %s" % did["watchers"],
                  did["watchers"] == list(range(8)), did["watchers"])
            check("no frame taken on a code watcher's word when none could be added", trusted == 0, trusted)
        return did["subinterpreter"] is not None

    has_watchers = one_run(False)  # (3.12+)
    if has_watchers and not failures:
        print("again, the program first taking every code watcher slot (3.12+):")
        one_run(True)
    elif not failures:
        print("again, the program putting PyCode_Type's own deallocator back over the wrapper (3.11):")
        one_run(False, restore=True)
    if not failures:
        print("again, with GPUMEMPROF_CODE_WATCHER=0:")
        one_run(False, watcher=False)
    print("%d checks failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
