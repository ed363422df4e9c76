#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`gpumemprof replay` and the snapshot converter on hostile input:
files that are not traces, traces that claim absurd sizes, a host-memory limit, malformed snapshots.

usage: test_replay_limits.py PATH/TO/gpumemprof PATH/TO/scripts
"""

import os
import pickle
import resource
import subprocess
import sys
import tempfile
import threading
import time
import unittest

CLI = None
SCRIPTS = None
MiB = 1 << 20


def tw():
    sys.path.insert(0, SCRIPTS)
    import torch_snapshot_to_trace  # noqa: E402
    return torch_snapshot_to_trace


def run(*args, limit_as=None, timeout=60):
    def pre():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    p = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                       preexec_fn=pre if limit_as else None)
    return p.returncode, p.stdout, p.stderr


class NotATrace(unittest.TestCase):
    """Item 8: the magic is checked first and reads are bounded by what the data claims."""

    def test_dev_zero_and_urandom_fail_at_once(self):
        for path in ("/dev/zero", "/dev/urandom"):
            t0 = time.monotonic()
            rc, _, err = run("replay", path, timeout=30)
            self.assertEqual(rc, 1, path)
            self.assertIn("not a gpumemprof trace", err, path)
            self.assertLess(time.monotonic() - t0, 10, path)

    def test_endless_garbage_after_a_valid_header(self):
        # A valid header, then random bytes without end through a pipe: replay must stop at the
        # first block that is not one, not read on forever.
        with tempfile.TemporaryDirectory() as d:
            head = os.path.join(d, "head.gmt")
            w = tw().TraceWriter(head, pid=1, host="h", exe="x")
            w.close(end_record=False)
            with open(head, "rb") as f:
                header = f.read()
        p = subprocess.Popen([CLI, "replay", "/dev/stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        fed = [0]

        def feed():
            try:
                p.stdin.write(header)
                chunk = os.urandom(1 << 16)
                while p.poll() is None and fed[0] < (4 << 30):
                    p.stdin.write(chunk)
                    fed[0] += len(chunk)
            except (BrokenPipeError, OSError, ValueError):
                pass

        t = threading.Thread(target=feed, daemon=True)
        t.start()
        try:
            p.wait(timeout=30)  # stdin stays open: the feeder owns it
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.fail("replay still reading endless garbage after 30 s (%d bytes fed)" % fed[0])
        t.join(5)
        err = p.stderr.read()
        p.stdout.close()
        p.stderr.close()
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"block magic", err)
        self.assertLess(fed[0], 64 << 20, "replay read far more than one block's worth")


class Bounds(unittest.TestCase):
    """Item 11: a trace naming 60,000 devices is refused, not simulated with gigabytes."""

    def test_sixty_thousand_devices(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "many.gmt")
            with tw().TraceWriter(path, devices=[(i, 80 << 30) for i in range(60000)]) as w:
                w.record(tw().ALLOC, device=59999, ptr=0x1000, size=4096)
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            rc, out, err = run("replay", path)
            rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        self.assertEqual(rc, 1, out[:200])
        self.assertIn("60000 devices", err)
        self.assertIn("at most 1024", err)
        # The peak RSS of the biggest child so far: well under the 1.8 GB it used to take.
        self.assertLess(max(before, rss_kib), 300 * 1024)


@unittest.skipIf(os.environ.get("GPUMEMPROF_TEST_ASAN_RUNTIME"),
                 "ASan reserves terabytes of address space: RLIMIT_AS cannot be used")
class HostMemoryLimit(unittest.TestCase):
    """Item 11: under RLIMIT_AS replay either gives the same numbers as without the limit or fails
    with a non-zero status and a message; never other numbers, never an abort."""

    def test_limit_gives_right_numbers_or_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "live.gmt")
            m = tw()
            # 200,000 blocks live at once, each in its own segment: the pool's bookkeeping grows
            # with every request, so a limit can run out inside the pool.
            with m.TraceWriter(path, devices=[(0, 1 << 50)]) as w:
                for i in range(200000):
                    w.record(m.ALLOC, ptr=0x100000000 + i * 0x10000000, size=(i % 97 + 1) * 4096 + 3 * MiB,
                             time_ns=i)
            rc, ref, err = run("replay", path, "--json")
            self.assertEqual(rc, 0, err)
            outcomes = []
            for mb in range(20, 85, 5):
                rc, out, err = run("replay", path, "--json", limit_as=mb * MiB)
                if rc == 127 and "error while loading" in err:
                    outcomes.append((mb, "cannot start"))
                    continue
                if rc == 0:
                    self.assertEqual(out, ref, "%d MB: exit status 0 with other numbers" % mb)
                    outcomes.append((mb, "same"))
                else:
                    # Non-zero (the CLI's "internal" status), not a signal: no abort, no crash.
                    self.assertGreater(rc, 0, "%d MB: %s" % (mb, err[-300:]))
                    self.assertIn("out of memory", err, "%d MB" % mb)
                    outcomes.append((mb, "error"))
            kinds = {k for _, k in outcomes}
            # The range must cover both sides, or the test proves nothing.
            self.assertIn("same", kinds, outcomes)
            self.assertIn("error", kinds, outcomes)


class MalformedSnapshots(unittest.TestCase):
    """Item 13: the converter answers malformed snapshots with a message (no traceback) and only
    writes traces that replay accepts."""

    CASES = {
        "negative device": {"segments": [{"device": -1, "address": 4096, "total_size": 2 * MiB,
                                          "blocks": [{"size": 2 * MiB, "state": "active_allocated"}]}]},
        "device out of range": {"segments": [{"device": 10 ** 9, "address": 4096, "total_size": 2 * MiB,
                                              "blocks": [{"size": 2 * MiB, "state": "active_allocated"}]}]},
        "blocks not a list": {"segments": [{"device": 0, "address": 0, "total_size": 2 * MiB, "blocks": 5}]},
        "negative size": {"segments": [], "device_traces": [[{"action": "alloc", "addr": -5, "size": -1}]]},
        "address beyond 64 bits": {"segments": [{"device": 0, "address": 2 ** 70, "total_size": 2 * MiB,
                                                 "blocks": [{"size": 2 * MiB, "state": "active_allocated"}]}]},
        "70,000 device lists": {"segments": [], "device_traces": [[] for _ in range(70000)]},
        "segments not a list": {"segments": 7},
        "entries of the wrong type": {"segments": [], "device_traces": [{"a": 1}, [None, 3, "x"]]},
        "requested size negative": {"segments": [{"device": 0, "address": 4096, "total_size": 2 * MiB,
                                                  "blocks": [{"size": 2 * MiB, "requested_size": -3,
                                                              "state": "active_allocated"}]}]},
    }

    def test_no_traceback_and_replayable(self):
        with tempfile.TemporaryDirectory() as d:
            for name, snap in self.CASES.items():
                with self.subTest(name):
                    src, out = os.path.join(d, "s.pickle"), os.path.join(d, "s.gmt")
                    with open(src, "wb") as f:
                        pickle.dump(snap, f)
                    if os.path.exists(out):
                        os.unlink(out)
                    p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "torch_snapshot_to_trace.py"), src,
                                        out], capture_output=True, text=True, timeout=120)
                    self.assertNotIn("Traceback", p.stderr)
                    if p.returncode != 0:
                        self.assertIn("torch_snapshot_to_trace:", p.stderr)
                        continue
                    rc, _, err = run("replay", out)
                    self.assertEqual(rc, 0, "%s: replay refused the converted trace: %s" % (name, err))

    def test_bad_device_segment_is_skipped_not_moved(self):
        # The segment on device 10**9 is dropped (and counted); nothing lands on another device.
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "s.pickle"), os.path.join(d, "s.gmt")
            with open(src, "wb") as f:
                pickle.dump(self.CASES["device out of range"], f)
            p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "torch_snapshot_to_trace.py"), src, out],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("1 segments skipped", p.stdout)
            self.assertIn("on 0 device(s)", p.stdout)


if __name__ == "__main__":
    CLI, SCRIPTS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1], verbosity=2)
