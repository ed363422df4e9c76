#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# An embedding program (embed_twice.c, built here against the interpreter under test) starts
# CPython, runs prog_embed.py, finalises it and does it all again in the same process, under
# LD_PRELOAD=libgpumemprof.so on the simulated device. Checked by value: each allocation of both
# lives is under its own function and line. A stack cache that outlived the first interpreter
# (the count of destroyed code objects: 3.12+ a code watcher's, which that interpreter stopped
# keeping when it was finalised; 3.11 PyCode_Type's deallocator's, which goes on counting)
# puts the second life's allocations under the first's functions. Skipped where the interpreter
# has no shared libpython to embed, or cannot run the script twice without the profiler either.
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "prog_embed.py")
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
from run_golden import site_lines  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
from exit_json import load_report  # noqa: E402
from preload_env import asan_runtime_from_env, preload_env  # noqa: E402
from checks import Checks  # noqa: E402
from python_args import parse_python_args  # noqa: E402

KIB = 1024


def main():
    a = parse_python_args(lambda ap: ap.add_argument("--cc", default=os.environ.get("CC", "cc")))
    if a is None:
        return 77
    names = ("INCLUDEPY", "LIBDIR", "LDVERSION", "VERSION", "Py_ENABLE_SHARED")
    info = subprocess.run([a.python, "-c", "import json, sys, sysconfig as s; "
                           "print(json.dumps({k: s.get_config_var(k) for k in sys.argv[1:]}))", *names],
                          capture_output=True, text=True)
    cfg = json.loads(info.stdout)
    if not cfg.get("Py_ENABLE_SHARED"):
        print("SKIP: %s has no shared libpython to embed" % a.python)
        return 77
    L = site_lines(PROG)
    check = Checks()
    failures = check.failures

    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "embed_twice")
        c = subprocess.run([a.cc, os.path.join(HERE, "embed_twice.c"), "-I" + cfg["INCLUDEPY"], "-L" + cfg["LIBDIR"],
                            "-lpython" + cfg["LDVERSION"], "-Wl,-rpath," + cfg["LIBDIR"], "-o", exe],
                           capture_output=True, text=True)
        if c.returncode != 0:
            print("SKIP: cannot build an embedding program against %s:\n%s" % (a.python, c.stderr[-2000:]))
            return 77
        # The interpreter under test must not see this one's PYTHON* settings.
        asan = asan_runtime_from_env()  # (the simulated runtime is instrumented in the ASan run)
        plain_env = {k: v for k, v in preload_env(a.sim_dir, leak_check=False).items() if not k.startswith("PYTHON")}
        plain_env["PYTHONPATH"] = HERE
        if asan:
            plain_env["LD_PRELOAD"] = asan
        plain = subprocess.run([exe, PROG], env=plain_env, capture_output=True, text=True, timeout=120)
        if plain.returncode != 0:
            print("SKIP: this Python cannot run the script twice in one process, without the profiler either "
                  "(exit %d): %s" % (plain.returncode, plain.stderr[-500:]))
            return 77
        env = {k: v for k, v in preload_env(a.sim_dir, a.lib, asan, output=os.path.join(tmp, "out"),
                                            leak_check=False,
                                            extra={"GPUMEMPROF_HTML": "0", "GPUMEMPROF_PICKLE": "0"}).items()
               if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = HERE  # (prog_embed.py imports reused_code.py)
        p = subprocess.run([exe, PROG], env=env, capture_output=True, text=True, timeout=120)
        check("exits 0, as without the profiler", p.returncode == 0, (p.returncode, p.stderr[-2000:]))
        if p.returncode != 0:
            return 1
        lives = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
        report = load_report(os.path.join(tmp, "out.json"))

    check("two lives of the interpreter ran", [x["round"] for x in lives] == [0, 1], p.stdout[-1000:])
    by_inner = collections.defaultdict(lambda: [0, 0])
    for s in report["sites"]:
        py = [(f["function"], f["line"]) for f in s["frames"] if f.get("kind") == "python"]
        if py:
            by_inner[py[-1]][0] += s["total_count"]
            by_inner[py[-1]][1] += s["requested_bytes"]
    for life in lives:
        r = life["round"]
        check("life %d: code objects made at freed ones' addresses (%d of 40)" % (r, life["reused_code_addresses"]),
              life["reused_code_addresses"] > 0, "the scenario did not happen: nothing was tested")
        wrong = [(g["name"], g["line"], by_inner.get((g["name"], g["line"]))) for g in life["generated"]
                 if by_inner.get((g["name"], g["line"]), [0, 0]) != [1, g["bytes"]]]
        check("life %d: each generated function's allocation under its own name and line (40)" % r, not wrong,
              wrong[:5])
    steady = by_inner.get(("steady", L["steady"]), [0, 0])
    check("both lives' 20 allocations from one line under it", steady == [40, 20 * (700 + 701) * KIB], steady)
    generated = sum(v[0] for k, v in by_inner.items() if k[0].startswith("g") and "_r" in k[0])
    check("no other allocation under a generated function", generated == 80, generated)
    trusted = report.get("stacks", {}).get("python_frames_trusted", 0)
    check("frames taken on the count of destroyed code objects (%d)" % trusted, trusted > 0,
          "the count was not used: the case it must not get wrong was not tested")
    print("%d checks failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
