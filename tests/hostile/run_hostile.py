#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Hostile-but-fair programs (hostile_prog) under LD_PRELOAD=libgpumemprof.so against the simulated
# driver: the library must not write into the program's files, hang it, kill it, replace its
# signal handlers, follow planted symlinks or lose its reports
# (docs/guarantees.md). Every run has a timeout; a hang is a failure, never a stuck test.
import argparse
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from preload_env import preload_env  # noqa: E402

MIB = 1 << 20


class Result:
    def __init__(self, rc, out, err, secs):
        self.rc, self.out, self.err, self.secs = rc, out, err, secs
        self.values = dict(l.split("=", 1) for l in out.splitlines() if "=" in l and not l.startswith("FAIL"))

    def val(self, k):
        v = self.values.get(k)
        try:
            return int(v)
        except (TypeError, ValueError):
            return v


class Checks:
    def __init__(self, case):
        self.case, self.rows, self.failed = case, [], 0

    def true(self, what, cond, detail=""):
        self.failed += not cond
        self.rows.append((bool(cond), what, detail))

    def eq(self, what, actual, expected):
        self.true(what, actual == expected, "actual=%r expected=%r" % (actual, expected))

    def finish(self, extra=""):
        print("case %s: %d checks, %d failed" % (self.case, len(self.rows), self.failed))
        for ok, what, detail in self.rows:
            print("  %s %s %s" % ("ok  " if ok else "FAIL", what, detail if not ok else ""))
        if self.failed and extra:
            print(extra)
        return 1 if self.failed else 0


def env_for(args, tmp, preload=True, extra=None):
    # Fork children of a multi-threaded parent: LeakSanitizer's own exit check is not fork-safe.
    return preload_env(args.sim_dir, args.lib if preload else None, asan_runtime=args.asan_runtime,
                       output=os.path.join(tmp, "out-%p"), leak_check=False, extra=extra)


def run(args, tmp, argv, preload=True, extra=None, timeout=60, stderr=subprocess.PIPE, cmd=None, cwd=None, shim=None):
    start = time.monotonic()
    env = env_for(args, tmp, preload, extra)
    if shim:  # an LD_PRELOAD shim of the test, before the library (after the ASan runtime)
        parts = env.get("LD_PRELOAD", "").split()
        at = 1 if args.asan_runtime and parts else 0
        env["LD_PRELOAD"] = " ".join(parts[:at] + [os.path.abspath(shim)] + parts[at:])
    try:
        p = subprocess.run(cmd or [args.prog, *argv], env=env, stdout=subprocess.PIPE,
                           stderr=stderr, timeout=timeout, cwd=cwd or tmp)
        rc, out, err = p.returncode, p.stdout, p.stderr or b""
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", e.stdout or b"", e.stderr or b""
    return Result(rc, out.decode(errors="replace"), err.decode(errors="replace"), time.monotonic() - start)


def reports(tmp, pattern="out-*.json"):
    out = []
    for path in sorted(glob.glob(os.path.join(tmp, pattern))):
        with open(path, "rb") as f:
            out.append(json.loads(f.read().decode("utf-8")))  # strict UTF-8
    return out


def leftovers(tmp):
    return [p for p in os.listdir(tmp) if ".tmp." in p]


# ---- fork children and files ---------------------------------------------------------------------
def case_fork_exit(args, tmp):
    c = Checks("fork_exit")
    r = run(args, tmp, ["fork_storm", "40"], timeout=300)
    c.eq("exit code", r.rc, 0)
    c.eq("children that hung at exit (of 40)", r.val("hung_children"), 0)
    reps = reports(tmp)
    c.eq("reports: the parent's only (the children made no allocation of their own)", len(reps), 1)
    return c.finish(r.out + r.err[-3000:])


# ---- fds, signals and names ----------------------------------------------------------------------
def case_fds(args, tmp):
    c = Checks("fds")
    data = os.path.join(tmp, "data.txt")
    trace = os.path.join(tmp, "run.gmt")
    r = run(args, tmp, ["fds", data], extra={"GPUMEMPROF_TRACE": trace})
    c.eq("exit code", r.rc, 0)
    with open(data, "rb") as f:
        content = f.read()
    c.eq("data.txt holds only the program's bytes", content, b"the program's own data\n")
    c.eq("the program saw no other writes (lseek end)", r.val("data_bytes"), len(content))
    p = subprocess.run([args.cli, "replay", trace, "--json"], capture_output=True, text=True, timeout=120,
                       env=env_for(args, tmp, preload=False))
    c.eq("the trace stays valid (replay exit code)", p.returncode, 0)
    try:
        st = json.loads(p.stdout)["devices"][0]["memory_stats"]
        c.eq("the trace holds all 6010 allocations", st.get("allocation.all.allocated"), 6010)
    except (ValueError, KeyError, IndexError) as e:
        c.true("replay JSON", False, "%s %s" % (e, p.stderr[-500:]))
    return c.finish(r.out + r.err[-2000:])


def case_stderr_file(args, tmp):
    """The program closes stderr and opens a data file, which gets fd 2; a warning comes later
    (the exit report's directory is missing). It must not land in the data file."""
    c = Checks("stderr_file")
    data = os.path.join(tmp, "data.txt")
    before = run(args, tmp, ["churn", "5"], extra={"GPUMEMPROF_OUTPUT": os.path.join(tmp, "missing", "out")})
    c.true("with stderr in place the warning is there", "reports not written" in before.err, before.err[-400:])
    r = run(args, tmp, ["stderr_file", data], extra={"GPUMEMPROF_OUTPUT": os.path.join(tmp, "missing", "out")})
    c.eq("exit code", r.rc, 0)
    with open(data, "rb") as f:
        content = f.read()
    c.eq("data.txt holds only the program's bytes", content, b"the program's own data\n")
    return c.finish(r.out + r.err[-2000:])


def case_system_child(args, tmp):
    c = Checks("system_child")
    trace = os.path.join(tmp, "run.gmt")  # no %p: the README's own example
    r = run(args, tmp, ["system_child"], extra={"GPUMEMPROF_TRACE": trace, "GPUMEMPROF_OUTPUT": os.path.join(tmp, "run")})
    c.eq("exit code", r.rc, 0)
    p = subprocess.run([args.cli, "replay", trace, "--json"], capture_output=True, text=True, timeout=120,
                       env=env_for(args, tmp, preload=False))
    c.eq("replay of the parent's trace: exit code", p.returncode, 0)
    try:
        st = json.loads(p.stdout)["devices"][0]["memory_stats"]
        c.eq("the trace holds all 600 allocations", st.get("allocation.all.allocated"), 600)
    except (ValueError, KeyError, IndexError) as e:
        c.true("replay JSON", False, "%s %s" % (e, p.stderr[-500:]))
    c.eq("no other trace file (the shell and true never open one)", sorted(glob.glob(trace + "*")), [trace])
    rep = reports(tmp, "run.json")
    c.true("the parent's report is at run.json", rep and rep[0].get("pid") and rep[0]["pid"] != 0)
    return c.finish(r.out + r.err[-2000:])


def replay_allocations(args, tmp, trace):
    """(exit code, allocation.all.allocated or the error) of `gpumemprof replay TRACE --json`."""
    p = subprocess.run([args.cli, "replay", trace, "--json"], capture_output=True, text=True, timeout=120,
                       env=env_for(args, tmp, preload=False))
    try:
        return p.returncode, json.loads(p.stdout)["devices"][0]["memory_stats"].get("allocation.all.allocated")
    except (ValueError, KeyError, IndexError) as e:
        return p.returncode, "%s %s" % (e, p.stderr[-300:])


def check_two_traces(c, args, tmp, label, trace, counts, r):
    """`trace` and one `<trace>.<pid>` beside it, holding `counts` allocations (the first process's
    first), each replayed and reported by the CLI without error, and the newcomer's warning."""
    others = sorted(p for p in glob.glob(trace + ".*") if p[len(trace) + 1:].isdigit())
    c.eq("%s: one more trace, <trace>.<pid>" % label, len(others), 1)
    for path, count in zip([trace] + others, counts):
        name = os.path.basename(path)
        c.eq("%s: replay %s" % (label, name), replay_allocations(args, tmp, path), (0, count))
        p = subprocess.run([args.cli, "report", path, "--txt", path + ".txt", "--html", path + ".html"],
                           capture_output=True, text=True, timeout=120, env=env_for(args, tmp, preload=False))
        c.eq("%s: report %s: exit code" % (label, name), p.returncode, 0)
    if others:
        c.true("%s: a warning names both files" % label,
               ("is recording into %s; this process records into %s" % (trace, others[0])) in r.err, r.err[-1500:])


def case_shared_trace(args, tmp):
    """A second CUDA process with the same GPUMEMPROF_TRACE (no %p) while the first records."""
    c = Checks("shared_trace")
    for how in ("posix_spawn", "vfork", "fork_alloc", "daemon"):
        d = os.path.join(tmp, how)
        os.mkdir(d)
        trace = os.path.join(d, "run.gmt")
        r = run(args, d, ["share_trace", how], extra={"GPUMEMPROF_TRACE": trace}, timeout=120)
        c.eq("%s: exit code" % how, r.rc, 0)
        c.eq("%s: done" % how, r.val("done"), 1)
        # The parent allocates 200 + 200 times, the second process 150 times.
        check_two_traces(c, args, d, how, trace, [400, 150], r)
    # Two ranks started together by a shell, both alive while each opens the trace.
    d = os.path.join(tmp, "peers")
    os.mkdir(d)
    trace = os.path.join(d, "run.gmt")
    script = '"$0" trace_peer "$1" 2 & "$0" trace_peer "$1" 2 & wait'
    r = run(args, d, [], cmd=["sh", "-c", script, args.prog, d], extra={"GPUMEMPROF_TRACE": trace}, timeout=120)
    c.eq("peers: exit code", r.rc, 0)
    c.eq("peers: both done", r.out.count("done=1"), 2)
    check_two_traces(c, args, d, "peers", trace, [200, 200], r)
    return c.finish(r.out + r.err[-2000:])


def case_usr2_storm(args, tmp):
    c = Checks("usr2_storm")
    r = run(args, tmp, ["usr2_storm", "8"], timeout=90)
    c.eq("exit code (no deadlock)", r.rc, 0)
    c.eq("done", r.val("done"), 1)
    c.eq("one report at exit", len(reports(tmp)), 1)
    c.eq("no temporary files left", leftovers(tmp), [])
    return c.finish(r.out + r.err[-2000:])


def case_exit_in_handler(args, tmp):
    c = Checks("exit_in_handler")
    codes = []
    for i in range(10):
        d = os.path.join(tmp, str(i))
        os.mkdir(d)
        codes.append(run(args, d, ["exit_in_handler"], timeout=30).rc)
    c.eq("exit status of 10 runs (exit(7) from a SIGALRM handler)", codes, [7] * 10)
    return c.finish()


def case_sigterm(args, tmp):
    c = Checks("sigterm")
    outcomes = []
    for i in range(8):
        d = os.path.join(tmp, str(i))
        os.mkdir(d)
        p = subprocess.Popen([args.prog, "alloc_forever"], env=env_for(args, d), cwd=d, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.readline()  # ready=1
        time.sleep(0.3 + 0.1 * i)
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        p.stdout.close()
        p.stderr.close()
        outcomes.append((rc, len(glob.glob(os.path.join(d, "out-*.json")))))
    c.eq("8 runs killed by SIGTERM: (status, reports)", outcomes, [(-signal.SIGTERM, 1)] * 8)
    return c.finish()


def case_sigterm_at_exit(args, tmp):
    """SIGTERM while the exit report is being written, on a slow disk (tests/hostile/slow_write.c:
    30 writes of 300 ms, the first one sends the signal): the report goes on while its writes
    do, every file is whole, then the process dies of the signal."""
    c = Checks("sigterm_at_exit")
    extra = {"SLOW_WRITE_SIGTERM": "1", "GPUMEMPROF_PICKLE": "0"}
    r = run(args, tmp, ["unique_stacks", "13"], extra=extra, timeout=180, shim=args.slow_write)
    c.eq("killed by the SIGTERM (after the report)", r.rc, -signal.SIGTERM)
    c.eq("the program had finished", r.val("done"), 1)
    written = sorted(n.split(".", 1)[1] for n in os.listdir(tmp) if n.startswith("out-"))
    c.eq("every report file written", written, ["alloc.folded", "folded", "html", "json", "txt"])
    reps = reports(tmp)
    c.true("the JSON is whole: 8192 call sites", len(reps) == 1 and len(reps[0].get("sites", [])) >= 8192,
           [len(x.get("sites", [])) for x in reps])
    c.eq("no temporary file left", leftovers(tmp), [])
    c.true("no warning of a call that did not return", "has not left it" not in r.err and "has not returned" not in r.err,
           r.err[-600:])
    return c.finish(r.out + r.err[-2000:])


def case_own_handler(args, tmp):
    c = Checks("own_handler")
    plain = run(args, tmp, ["own_usr2"], preload=False)
    r = run(args, tmp, ["own_usr2"])
    c.eq("without the preload: the program's SIGUSR2 handler ran once", plain.val("own_handler_runs"), 1)
    c.eq("with the preload: it still runs once", r.val("own_handler_runs"), 1)
    c.true("a warning says the signal is not taken", "not taken" in r.err, r.err[-500:])
    reps = reports(tmp)
    ds = reps[0].get("dump_signal", {}) if reps else {}
    c.eq("the report says so", (ds.get("installed"), ds.get("not_installed_because")), (False, "the program handles it"))
    txt = glob.glob(os.path.join(tmp, "out-*.txt"))
    c.true("the .txt says so", txt and "is not taken" in open(txt[0]).read())
    return c.finish(r.err[-2000:])


def case_bad_dump_signal(args, tmp):
    c = Checks("bad_dump_signal")
    for value in ("11", "SIGSEGV", "TERM", "9", "19", "32", "33", "KILL"):
        d = os.path.join(tmp, value)
        os.mkdir(d)
        r = run(args, d, ["churn", "5"], extra={"GPUMEMPROF_DUMP_SIGNAL": value})
        c.true("GPUMEMPROF_DUMP_SIGNAL=%s: one warning naming it" % value,
               r.err.count('GPUMEMPROF_DUMP_SIGNAL="%s" is not valid' % value) == 1, r.err[-300:])
        rep = reports(d)
        c.eq("GPUMEMPROF_DUMP_SIGNAL=%s: the default SIGUSR2 is used" % value,
             rep[0].get("dump_signal", {}).get("signal") if rep else None, signal.SIGUSR2)
    for value, sig in (("USR1", signal.SIGUSR1), ("RTMIN+2", signal.SIGRTMIN + 2), ("0", 0)):
        d = os.path.join(tmp, "ok" + value)
        os.mkdir(d)
        r = run(args, d, ["churn", "5"], extra={"GPUMEMPROF_DUMP_SIGNAL": value})
        c.true("GPUMEMPROF_DUMP_SIGNAL=%s: accepted silently" % value, "not valid" not in r.err, r.err[-300:])
        rep = reports(d)
        c.eq("GPUMEMPROF_DUMP_SIGNAL=%s: signal %d" % (value, sig), rep[0].get("dump_signal", {}).get("signal") if rep else None, sig)
    return c.finish()


def case_symlinks(args, tmp):
    c = Checks("symlinks")
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    trace = os.path.join(tmp, "run.gmt")
    os.symlink(victim, trace)
    r = run(args, tmp, ["plant", os.path.join(tmp, "rep"), victim],
            extra={"GPUMEMPROF_TRACE": trace, "GPUMEMPROF_OUTPUT": os.path.join(tmp, "rep")})
    c.eq("exit code", r.rc, 0)
    c.true("symlinks planted at the report's temporary names", (r.val("planted") or 0) >= 8, r.out)
    c.eq("the victim is untouched", open(victim, "rb").read(), b"precious\n")
    c.true("the trace symlink is refused with a warning", "symbolic link" in r.err, r.err[-600:])
    c.true("the report was written anyway", os.path.isfile(os.path.join(tmp, "rep.json")) and
           not os.path.islink(os.path.join(tmp, "rep.json")))
    return c.finish(r.err[-2000:])


def case_output_names(args, tmp):
    c = Checks("output_names")
    # A prefix ending in '/' names a directory.
    d = os.path.join(tmp, "dir")
    os.mkdir(d)
    r = run(args, tmp, ["churn", "3"], extra={"GPUMEMPROF_OUTPUT": d + "/"})
    names = sorted(os.listdir(d))
    c.true("prefix 'dir/': no hidden files", not any(n.startswith(".") for n in names), names)
    c.true("prefix 'dir/': dir/gpumemprof-<pid>.json", any(n.startswith("gpumemprof-") and n.endswith(".json") for n in names), names)
    # %r is read once and sanitised.
    r = run(args, tmp, ["churn", "3"], extra={"GPUMEMPROF_OUTPUT": os.path.join(tmp, "r%r"), "RANK": "../../x/y"})
    c.true("%r with RANK=../../x/y stays in the directory", os.path.isfile(os.path.join(tmp, "r______x_y.json")),
           sorted(os.listdir(tmp)))
    c.true("%r: a warning names RANK", 'RANK="../../x/y"' in r.err, r.err[-300:])
    # Empty GPUMEMPROF_OUTPUT: a warning, then the default prefix.
    e = os.path.join(tmp, "empty")
    os.mkdir(e)
    r = run(args, e, ["churn", "3"], extra={"GPUMEMPROF_OUTPUT": ""})
    c.true("GPUMEMPROF_OUTPUT= : a warning", 'GPUMEMPROF_OUTPUT="" is not valid' in r.err, r.err[-300:])
    c.true("GPUMEMPROF_OUTPUT= : the default gpumemprof-<pid>.json", glob.glob(os.path.join(e, "gpumemprof-*.json")),
           os.listdir(e))
    # The longest valid names: <prefix>.alloc.folded is 255 bytes (NAME_MAX), its temporary name
    # would be longer; a trace name of 255 bytes, whose <trace>.<pid> would be too.
    lg = os.path.join(tmp, "long")
    os.mkdir(lg)
    prefix = os.path.join(lg, "p" * (255 - len(".alloc.folded")))
    r = run(args, lg, ["churn", "3"], extra={"GPUMEMPROF_OUTPUT": prefix})
    written = sorted(n[len(os.path.basename(prefix)) + 1:] for n in os.listdir(lg))
    c.eq("a 242-byte prefix: every report written", written, ["alloc.folded", "folded", "html", "json", "pickle", "txt"])
    c.true("a 242-byte prefix: no warning", "warning" not in r.err, r.err[-400:])
    lt = os.path.join(tmp, "longtrace")
    os.mkdir(lt)
    trace = os.path.join(lt, "t" * 255)
    r = run(args, lt, ["share_trace", "posix_spawn"], extra={"GPUMEMPROF_TRACE": trace}, timeout=120)
    traces = sorted(n for n in os.listdir(lt) if n.startswith("t"))
    c.eq("a 255-byte trace name and a second process: two traces, each name <= 255 bytes",
         (len(traces), max(len(n) for n in traces) if traces else 0), (2, 255))
    c.true("the second trace's name ends with its pid", len(traces) == 2 and traces[0].rsplit(".", 1)[-1].isdigit(),
           traces)
    # /dev/stdout and a FIFO are not prefixes to write under.
    before = set(os.listdir("/dev"))
    r = run(args, tmp, ["churn", "3"], extra={"GPUMEMPROF_OUTPUT": "/dev/stdout"})
    c.eq("GPUMEMPROF_OUTPUT=/dev/stdout: exit code", r.rc, 0)
    c.eq("GPUMEMPROF_OUTPUT=/dev/stdout: nothing created under /dev", sorted(set(os.listdir("/dev")) - before), [])
    c.true("GPUMEMPROF_OUTPUT=/dev/stdout: a warning", "is a device, FIFO or directory" in r.err, r.err[-300:])
    fifo = os.path.join(tmp, "rep.json")
    os.mkfifo(fifo)
    r = run(args, tmp, ["churn", "3"], extra={"GPUMEMPROF_OUTPUT": os.path.join(tmp, "rep")}, timeout=30)
    c.eq("a FIFO at <prefix>.json: exit code", r.rc, 0)
    c.true("a FIFO at <prefix>.json stays a FIFO", stat.S_ISFIFO(os.lstat(fifo).st_mode))
    c.true("a FIFO at <prefix>.json: a warning", "not a regular file" in r.err, r.err[-300:])
    # The executable's path is not UTF-8: the JSON still is.
    odd = os.path.join(tmp.encode(), b"prog-\xff\xfe")
    shutil.copy(args.prog, odd)
    u = os.path.join(tmp, "utf")
    os.mkdir(u)
    r = run(args, u, [], cmd=[odd, "churn", "3"])
    try:
        rep = reports(u)
        c.true("a non-UTF-8 executable path: the JSON is valid UTF-8", len(rep) == 1 and "\ufffd" in rep[0]["exe"],
               rep[0]["exe"] if rep else None)
    except (UnicodeDecodeError, ValueError) as e:
        c.true("a non-UTF-8 executable path: the JSON is valid UTF-8", False, e)
    return c.finish()


# ---- limits, pipes, lifetimes --------------------------------------------------------------------
def case_fsize(args, tmp):
    c = Checks("fsize")
    for limit, trace in ((4096, False), (65536, True)):
        d = os.path.join(tmp, str(limit))
        os.mkdir(d)
        extra = {"GPUMEMPROF_TRACE": os.path.join(d, "run.gmt")} if trace else {}
        r = run(args, d, ["fsize", str(limit), "50"], extra=extra, timeout=120)
        label = "RLIMIT_FSIZE %d%s" % (limit, " + trace" if trace else "")
        c.eq(label + ": exit code (no SIGXFSZ)", r.rc, 0)
        c.true(label + ": buffered stdout survives", "buffered stdout survives" in r.out, r.out[-200:])
        c.eq(label + ": no temporary file left", leftovers(d), [])
        written = sorted(n.split(".", 1)[1] for n in os.listdir(d) if n.startswith("out-"))
        # All or nothing: the four files or none.
        c.true(label + ": the report set is whole or absent", written in ([], ["alloc.folded", "folded", "json", "txt"]),
               written)
        if limit == 4096:
            c.eq(label + ": nothing fits: no report file", written, [])
            c.true(label + ": a warning says the reports were not written", "reports not written" in r.err,
                   r.err[-400:])
        if trace:
            c.true(label + ": the failed trace write is reported", "GPUMEMPROF_TRACE: trace write" in r.err, r.err[-400:])
    return c.finish()


def case_sigpipe(args, tmp):
    c = Checks("sigpipe")
    rfd, wfd = os.pipe()
    os.close(rfd)  # stderr is a pipe nobody reads any more
    try:
        r = run(args, tmp, ["churn", "20"], extra={"GPUMEMPROF_DUMP_SIGNAL": "bogus"}, stderr=wfd)
    finally:
        os.close(wfd)
    c.eq("a warning to a closed stderr pipe: exit code (no SIGPIPE)", r.rc, 0)
    c.eq("done", r.val("done"), 1)
    # A FIFO trace path never blocks, even in processes that do not use CUDA.
    fifo = os.path.join(tmp, "trace.fifo")
    os.mkfifo(fifo)
    r = run(args, tmp, [], cmd=["/bin/true"], extra={"GPUMEMPROF_TRACE": fifo}, timeout=20)
    c.eq("/bin/true with a FIFO trace path: exit code", r.rc, 0)
    r = run(args, tmp, ["churn", "20"], extra={"GPUMEMPROF_TRACE": fifo}, timeout=20)
    c.eq("a CUDA program with a FIFO trace path: exit code", r.rc, 0)
    c.true("a CUDA program with a FIFO trace path: a warning", "not a regular file" in r.err or "No such device" in r.err,
           r.err[-300:])
    # Processes that never touch CUDA leave no trace file.
    t = os.path.join(tmp, "sh-%p.gmt")
    run(args, tmp, [], cmd=["/bin/sh", "-c", "true; ls >/dev/null"], extra={"GPUMEMPROF_TRACE": t})
    c.eq("sh, ls: no trace files", glob.glob(os.path.join(tmp, "sh-*.gmt")), [])
    return c.finish()


def case_cancel(args, tmp):
    c = Checks("cancel")
    for i in range(3):
        d = os.path.join(tmp, str(i))
        os.mkdir(d)
        r = run(args, d, ["cancel"], extra={"GPUMEMPROF_TRACE": os.path.join(d, "t.gmt")}, timeout=60)
        c.eq("run %d: the cancelled thread is joined" % i, r.val("joined"), 1)
        c.eq("run %d: exit code" % i, r.rc, 0)
    # A cancel already pending when the thread calls in: the calls reach cancellation points inside
    # the library (warnings, the OOM notice, the trace, gpumemprof_dump's reports); the request must
    # take effect at the program's own pthread_testcancel, as it does without the preload.
    d = os.path.join(tmp, "pending")
    os.mkdir(d)
    base = run(args, d, ["cancel_pending", os.path.join(d, "dump")], preload=False, timeout=60)
    c.eq("cancel pending, without the preload: every call returned, cancelled at testcancel",
         (base.rc, base.val("cancelled"), base.val("reached"), base.val("done")), (0, 1, 1, 1))
    r = run(args, d, ["cancel_pending", os.path.join(d, "dump")],
            extra={"GPUMEMPROF_TRACE": os.path.join(d, "t.gmt")}, timeout=60)
    c.eq("cancel pending, with the preload: every call returned, cancelled at testcancel",
         (r.rc, r.val("cancelled"), r.val("reached"), r.val("done")), (0, 1, 1, 1))
    c.true("cancel pending: the library warned of the double free and the out-of-memory (it reached those "
           "cancellation points)", "not the start of a live allocation" in r.err and "out of memory" in r.err.lower(),
           r.err[-400:])
    c.true("cancel pending: gpumemprof_dump wrote its reports", os.path.exists(os.path.join(d, "dump.json")))
    return c.finish()


def case_lifetimes(args, tmp):
    c = Checks("lifetimes")
    # Immediate reuse: no fence events, so the simulated device starts no stream threads of its
    # own (a real driver's threads keep such a program alive with or without the profiler).
    immediate = {"GPUMEMPROF_REUSE": "immediate"}
    plain = run(args, tmp, ["pthread_exit_main"], preload=False, timeout=30)
    d = os.path.join(tmp, "pe")
    os.mkdir(d)
    r = run(args, d, ["pthread_exit_main"], extra=immediate, timeout=30)
    c.eq("main calls pthread_exit: exit code without the preload", plain.rc, 0)
    c.eq("main calls pthread_exit: exit code with the preload", r.rc, 0)
    c.true("main calls pthread_exit: the process ends within 3 s", r.secs < 3.0, "%.2f s" % r.secs)
    c.eq("main calls pthread_exit: a report", len(reports(d)), 1)
    d = os.path.join(tmp, "qe")
    os.mkdir(d)
    r = run(args, d, ["quick_exit"], timeout=30)
    c.eq("quick_exit(3): exit code", r.rc, 3)
    reps = reports(d)
    c.eq("quick_exit: a report with the live 3 MiB", [x["devices"][0]["memory_stats"]["allocated_bytes.all.current"]
                                                      for x in reps], [3 * MIB])
    return c.finish()


# ---- small stacks, many threads ------------------------------------------------------------------
def asan_skip(args, why):
    # 77: meson's "skipped". The preloaded ASan runtime makes these cases meaningless, not failing.
    if args.asan_runtime:
        print("skipped under ASan: " + why)
        sys.exit(77)


def case_small_stacks(args, tmp):
    asan_skip(args, "ASan's instrumented frames and malloc stack traces alone overflow a 16 KiB thread")
    c = Checks("small_stacks")
    prog = [args.limits_prog, "small_stacks"]
    r = run(args, tmp, [], cmd=prog, timeout=60)
    c.eq("exit code", r.rc, 0)
    c.eq("16 KiB pthread: allocated and freed", r.val("thread_done"), 1)
    c.eq("8 KiB makecontext coroutine: allocated and freed", r.val("coroutine_done"), 1)
    c.eq("coroutine: bytes written below its 8 KiB stack", r.val("coroutine_overflow_bytes"), 0)
    c.eq("8 KiB sigaltstack handler: allocated and freed", r.val("sigaltstack_done"), 1)
    c.eq("sigaltstack: bytes written below its 8 KiB stack", r.val("sigaltstack_overflow_bytes"), 0)
    c.eq("the heap is whole afterwards", r.val("heap_ok"), 1)
    reps = reports(tmp)
    c.eq("one report", len(reps), 1)
    if reps:
        st = reps[0]["devices"][0]["memory_stats"]
        c.eq("allocations counted (1 + 3 x 10)", st.get("allocation.all.allocated"), 31)
        c.eq("live at exit: one block from each small context", st.get("allocated_bytes.all.current"), 3 * MIB)
        c.eq("allocations kept without a stack (3 x 10)", reps[0].get("stacks", {}).get("small_stack_skips"), 30)
    # Stack bytes of one warm cudaMalloc + cudaFree on a 1 MiB thread, without the preload, with
    # it and with stacks off (docs/measurements.md).
    used = {}
    for name, preload, extra in (("without", False, None), ("stacks on", True, None),
                                 ("stacks off", True, {"GPUMEMPROF_STACK_DEPTH": "0"})):
        d = os.path.join(tmp, name.replace(" ", "_"))
        os.mkdir(d)
        m = run(args, d, [], cmd=[args.limits_prog, "stack_use"], preload=preload, extra=extra, timeout=60)
        used[name] = m.val("stack_bytes")
        print("stack bytes per cudaMalloc+cudaFree, %s the preload: %s" % (name, used[name]))
    c.true("stack use measured", all(isinstance(v, int) and v > 0 for v in used.values()), repr(used))
    if all(isinstance(v, int) for v in used.values()):
        # The unwind itself runs in libunwind's frames; the profiler's own share stays a few KB.
        c.true("stacks off: at most 3 KiB more than without the preload",
               used["stacks off"] - used["without"] <= 3072, repr(used))
        c.true("stacks on: at most 6 KiB more than without the preload",
               used["stacks on"] - used["without"] <= 6144, repr(used))
    return c.finish(r.out + r.err[-3000:])


def case_rlimit_as(args, tmp):
    asan_skip(args, "ASan reserves terabytes of shadow address space, which RLIMIT_AS cannot bound")
    c = Checks("rlimit_as")
    warning = "frames are shown as module+offset"
    for margin in (16, 64, 1024):
        d = os.path.join(tmp, "m%d" % margin)
        os.mkdir(d)
        r = run(args, d, [], cmd=[args.limits_prog, "rlimit_as", str(margin)], timeout=120)
        c.eq("margin %d MiB: the program's exit status" % margin, r.rc, 7)
        c.eq("margin %d MiB: a report" % margin, len(reports(d)), 1)
        txt = glob.glob(os.path.join(d, "out-*.txt"))
        text = open(txt[0], errors="replace").read() if txt else ""
        if margin == 16:
            c.true("margin 16 MiB: the leak's frames as module+offset", "limits_prog+0x" in text, text[-1500:])
            c.eq("margin 16 MiB: one warning", r.err.count(warning), 1)
        elif margin == 1024:
            c.true("margin 1 GiB: the leak's frames with file:line", "limits_prog.cpp:" in text, text[-1500:])
            c.eq("margin 1 GiB: no warning", r.err.count(warning), 0)
        else:
            c.true("margin 64 MiB: the leak's frames name the program", "limits_prog" in text, text[-1500:])
            c.true("margin 64 MiB: at most one warning", r.err.count(warning) <= 1, r.err[-800:])
    return c.finish(r.out + r.err[-3000:])


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--limits-prog", default="")
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--asan-runtime", default="")
    ap.add_argument("--slow-write", default="", help="tests/hostile/slow_write.c, built")
    args = ap.parse_args()
    args.prog = os.path.abspath(args.prog)
    args.limits_prog = os.path.abspath(args.limits_prog) if args.limits_prog else ""
    args.cli = os.path.abspath(args.cli)
    with tempfile.TemporaryDirectory(prefix="gpumemprof_hostile_") as tmp:
        sys.exit(CASES[args.case](args, tmp))


if __name__ == "__main__":
    main()
