# SPDX-License-Identifier: MIT
"""What every preload case uses: one run of the program (Run), the checks and their table
(Checker), the environment of a run, the reports and SIMCUDA_LOG records it left, the CLI's
replay, and readers of the JSON's figures. The cases are in cases_*.py, by what they test;
run_case.py runs one."""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from exit_json import load_report  # noqa: E402
from preload_env import preload_env  # noqa: E402


MIB = 1 << 20


class Run:
    def __init__(self, label, rc, stdout, stderr, reports, sim, out_dir=None):
        self.label, self.rc, self.stdout, self.stderr = label, rc, stdout, stderr
        self.out_dir = out_dir  # GPUMEMPROF_OUTPUT is <out_dir>/out-%p
        self.reports = reports  # list of parsed JSON reports (one per process)
        self.sim = sim          # list of SIMCUDA_LOG records (one per process)
        self.values = {}
        for line in stdout.splitlines():
            if "=" in line and not line.startswith("FAIL"):
                k, v = line.split("=", 1)
                self.values[k] = v

    def val(self, key):
        v = self.values.get(key)
        try:
            return int(v)
        except (TypeError, ValueError):
            return v

    def report(self, pid=None):
        """The report of `pid` (default: the only/first one)."""
        for r in self.reports:
            if pid is None or r.get("pid") == pid:
                return r
        return None

    def sim_ok(self, name, pid=None):
        """Successful calls of a driver entry point seen by the simulated driver (process `pid` or all)."""
        return sum(r.get("ok", {}).get(name, 0) for r in self.sim if pid is None or r.get("pid") == pid)

    def sim_calls(self, name):
        return sum(r.get("calls", {}).get(name, 0) for r in self.sim)


class Checker:
    def __init__(self, case):
        self.case = case
        self.rows = []
        self.failed = 0

    def eq(self, what, actual, expected):
        ok = actual == expected
        self.failed += not ok
        self.rows.append((ok, what, actual, expected))

    def ge(self, what, actual, minimum):
        ok = isinstance(actual, int) and actual >= minimum
        self.failed += not ok
        self.rows.append((ok, what, actual, ">= %s" % minimum))

    def true(self, what, cond, detail=""):
        self.failed += not cond
        self.rows.append((bool(cond), what, detail, "true"))

    def finish(self, runs):
        print("case %s: %d checks, %d failed" % (self.case, len(self.rows), self.failed))
        width = max([len(r[1]) for r in self.rows] + [10])
        for ok, what, actual, expected in self.rows:
            mark = "ok  " if ok else "FAIL"
            line = "  %s %-*s actual=%s" % (mark, width, what, actual)
            if not ok:
                line += "  expected=%s" % (expected,)
            print(line)
        if self.failed:
            for r in runs:
                print("---- run '%s': rc=%s" % (r.label, r.rc))
                print("stdout:\n" + r.stdout.rstrip())
                print("stderr (last 40 lines):\n" + "\n".join(r.stderr.rstrip().splitlines()[-40:]))
                print("reports: %d, sim logs: %s" % (len(r.reports), json.dumps(r.sim)[:2000]))
        return 1 if self.failed else 0


def report_text(run):
    """The run's <prefix>.txt (one process), or ""."""
    files = glob.glob(os.path.join(run.out_dir, "out-*.txt"))
    return open(files[0]).read() if len(files) == 1 else ""


def device_entry(report, device=0):
    """The devices[] entry of `device`; with several contexts, the one that served the most mallocs."""
    if not report:
        return None
    entries = [d for d in report.get("devices", []) if d.get("device") == device]
    if not entries:
        return None
    return max(entries, key=lambda d: d.get("memory_stats", {}).get("allocation.all.allocated", 0))


def stat(report, key, device=0):
    d = device_entry(report, device)
    if d is None:
        return "<no devices[%d] entry>" % device
    return d.get("memory_stats", {}).get(key, "<missing %s>" % key)


def model_stat(report, key, device=0):
    """A memory_stats key of the PyTorch-allocator model (devices[i].pytorch_model)."""
    d = device_entry(report, device)
    if d is None:
        return "<no devices[%d] entry>" % device
    return d.get("pytorch_model", {}).get("memory_stats", {}).get(key, "<missing %s>" % key)


def prog_env(args, out_dir, preload, extra_env=None, leak_check=True):
    """The environment of one run: simulated driver first on the library path, then the
    program's directory (its runtime-loaded libraries), outputs in out_dir; LeakSanitizer off
    with `leak_check=False` and in the cases of NO_LEAK_CHECK."""
    return preload_env(args.sim_dir, args.lib if preload else None, asan_runtime=args.asan_runtime,
                       lib_dirs=[os.path.dirname(os.path.abspath(args.prog))],
                       output=os.path.join(out_dir, "out-%p"),
                       leak_check=leak_check and args.case not in NO_LEAK_CHECK,
                       extra=dict({"SIMCUDA_LOG": os.path.join(out_dir, "sim-%p.log")}, **(extra_env or {})))


# Cases whose processes LeakSanitizer must not check (builds with -Db_sanitize=address):
# fork_child: the child drops the parent's pools on purpose (Profiler::fork_child), which LSan
# reports as leaks; and LSan's exit-time check in a child forked while other threads (the
# simulated device's stream workers) run can deadlock on the allocator lock (seen with GCC 12).
NO_LEAK_CHECK = {"fork_child", "fork_child_alloc"}


def collect(out_dir):
    """The JSON reports and SIMCUDA_LOG records a run left in out_dir."""
    reports = []
    for path in sorted(glob.glob(os.path.join(out_dir, "out-*.json"))):
        try:
            reports.append(load_report(path))
        except (OSError, ValueError) as e:
            reports.append({"_error": "%s: %s" % (path, e)})
    sim = []
    for path in sorted(glob.glob(os.path.join(out_dir, "sim-*.log"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    sim.append(json.loads(line))
    return reports, sim


# LeakSanitizer's own crash at exit, not a leak it found: that run says nothing of the program.
# Its tracer faults reading a thread's dynamic TLS range, which GCC 12's runtime held as garbage
# for a thread started on the stack of one that had ended (LSAN_OPTIONS=verbosity=1 showed "DTLS
# 11 at 0x000600000087-0x001600001189", then "Tracer caught signal 11: addr=0x600000088"). Seen once
# in many ASan-stage runs before; on 2026-12-05 in up to half the runs of preload cases whose
# program starts threads after others ended. After three such crashes the run is made once more
# with leak detection off (noted): every other check of the run still holds, and the leak check
# stays with the runs and cases where LeakSanitizer works.
LSAN_RUNTIME_CRASH = "LeakSanitizer has encountered a fatal error"
LSAN_ATTEMPTS = 4


def run_prog(args, tmp, label, preload, extra_env=None, argv=()):
    out_dir = os.path.join(tmp, label)
    for attempt in range(1, LSAN_ATTEMPTS + 1):
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        env = prog_env(args, out_dir, preload, extra_env, leak_check=attempt < LSAN_ATTEMPTS)
        try:
            p = subprocess.run([args.prog, *argv], env=env, capture_output=True, text=True, timeout=120)
            rc, so, se = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc = "timeout"
            so = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            se = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        if rc == 0 or LSAN_RUNTIME_CRASH not in se or attempt == LSAN_ATTEMPTS:
            break
        print("note: %s: LeakSanitizer itself crashed at exit; running it again%s" %
              (label, " without leak detection" if attempt + 1 == LSAN_ATTEMPTS else ""))
    reports, sim = collect(out_dir)
    return Run(label, rc, so, se, reports, sim, out_dir)


def both(args, tmp, extra_env=None, argv=()):
    return (run_prog(args, tmp, "plain", False, extra_env, argv),
            run_prog(args, tmp, "preload", True, extra_env, argv))


def both_ran(c, args, tmp, extra_env=None, argv=()):
    """both(), each run checked to exit with 0."""
    plain, pre = both(args, tmp, extra_env, argv)
    for r in (plain, pre):
        c.eq("%s: exit code" % r.label, r.rc, 0)
    return plain, pre


def cli_replay(c, args, trace, label, conf=None):
    """`gpumemprof replay TRACE --json [--conf CONF]`, not preloaded: checked to exit with 0 and
    print JSON; returns that JSON ({} when it is not)."""
    cmd = [args.cli, "replay", trace, "--json"] + ([] if conf is None else ["--conf", conf])
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    c.eq("%s: exit code" % label, p.returncode, 0)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        c.true("%s: output is JSON" % label, False, "%s: %s" % (e, p.stdout[:300] + p.stderr[-300:]))
        return {}


def check_stats(c, report, expected, prefix="memory_stats"):
    for key, value in expected.items():
        c.eq("%s[%s]" % (prefix, key), stat(report, key), value)


def same_values(c, plain, pre, keys):
    for k in keys:
        c.eq("stdout %s: same with/without preload" % k, pre.val(k), plain.val(k))


def check_passthrough_kind(c, kind_obj, name, calls, frees, current, peak, total):
    if not isinstance(kind_obj, dict):
        c.true("%s present" % name, False, kind_obj)
        return
    for k, v in (("calls", calls), ("frees", frees), ("current_bytes", current), ("peak_bytes", peak),
                 ("total_bytes", total)):
        c.eq("%s.%s" % (name, k), kind_obj.get(k), v)


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"_error": "%s: %s" % (path, e)}
