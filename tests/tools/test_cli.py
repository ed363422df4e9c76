#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of the gpumemprof CLI (replay, --json, --sweep, errors) and of the snapshot converter.

usage: test_cli.py PATH/TO/gpumemprof PATH/TO/scripts
Expected numbers are worked out by hand from PyTorch's rules (pytorch-allocator.md sections 1-2):
  round_size: multiple of 512; get_allocation_size: <= 1 MiB -> 2 MiB segment, < 10 MiB -> 20 MiB,
  else rounded up to 2 MiB; best fit per stream; large blocks split iff remaining > 1 MiB; with
  max_split_size set, a request below it never takes a free block at or above it.
"""

import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

CLI = None
SCRIPTS = None
MiB = 1 << 20


def run(*args):
    p = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def tw():
    sys.path.insert(0, SCRIPTS)
    import torch_snapshot_to_trace  # noqa: E402
    return torch_snapshot_to_trace


# Trace T1 (device 0, stream 0), with what PyTorch's default policy does at each step:
#   1 alloc a 1000 B -> round 1024, small pool, new 2 MiB segment              reserved  2 MiB
#   2 alloc b 3 MiB  -> large pool, 1 MiB < 3 MiB < 10 MiB: new 20 MiB segment reserved 22 MiB
#                       split: 17 MiB free tail (17 MiB > 1 MiB)
#   3 alloc c 12 MiB -> best fit: the 17 MiB tail; split, 5 MiB tail stays free reserved 22 MiB
#   4 free b         -> 3 MiB free block (c is allocated next to it: no merge)
#   5 alloc d 25 MiB -> nothing free >= 25 MiB; >= 10 MiB: new segment of 26 MiB (2 MiB multiple);
#                       remaining 1 MiB is not > 1 MiB: no split, d holds 26 MiB  reserved 48 MiB
#   6 free d         -> whole 26 MiB segment free (cached)
#   7 alloc e 6 MiB  -> best fit among 3, 5, 26 MiB free blocks: 26 MiB; split   reserved 48 MiB
#   peak allocated: after step 5: a 1024 + c 12 MiB + d 26 MiB = 38 MiB + 1024 B = 39846912
#   device allocs: 3 segments (2, 20, 26 MiB)
# With max_split_size_mb:20: steps 1-6 as above (b's 20 MiB segment splits since 3 MiB < 20 MiB;
#   the 17 MiB tail is below 20 MiB so c may take it; d's 26 MiB segment is oversize), but at
#   step 7 the 6 MiB request may not take the 26 MiB oversize block: new 20 MiB segment
#   -> peak reserved 2 + 20 + 26 + 20 = 68 MiB, 4 device allocs.
# With max_split_size_mb:20 and --capacity 60M: step 7 needs 48 + 20 = 68 > 60 MiB: the device
#   refuses; release_available_cached_blocks frees the free oversize 26 MiB segment (it is
#   >= max(6 MiB, 20 MiB)), the retry gets 20 MiB: peak reserved stays 48 MiB, 4 device allocs,
#   1 device free, no OOM, no counted retry (only the attempt after release_cached_blocks counts).
# With --capacity 40M (defaults): step 5 needs 22 + 26 = 48 > 40: no wholly free segment to
#   release -> OOM (retry counted); d fails, its free is skipped. Step 7: no free block >= 6 MiB
#   (3 and 5 MiB), a 20 MiB segment needs 42 > 40 -> OOM again. Peak reserved 22 MiB, 2 OOMs,
#   2 retries, 1 skipped free.
def write_t1(path, **kw):
    m = tw()
    base = 0x100000000
    steps = [
        (m.ALLOC, base + 0x0000000, 1000), (m.ALLOC, base + 0x1000000, 3 * MiB), (m.ALLOC, base + 0x2000000, 12 * MiB),
        (m.FREE_REQUESTED, base + 0x1000000, 3 * MiB), (m.ALLOC, base + 0x3000000, 25 * MiB),
        (m.FREE_REQUESTED, base + 0x3000000, 25 * MiB), (m.ALLOC, base + 0x5000000, 6 * MiB),
    ]
    with m.TraceWriter(path, pid=1, host="test", exe="t1", events_per_block=kw.get("per_block", 3)) as w:
        for i, (t, p, s) in enumerate(steps):
            w.record(t, ptr=p, size=s, time_ns=1000 + i)


def stats_of(out, device=0):
    doc = json.loads(out)
    for d in doc["devices"]:
        if d["device"] == device:
            return doc, d
    raise AssertionError("device %d not in output" % device)


class Cli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.t1 = os.path.join(self.dir.name, "t1.gmt")
        write_t1(self.t1)

    def tearDown(self):
        self.dir.cleanup()

    def test_exit_status_out_of_memory(self):
        # The help's exit statuses are the ones returned: running out of host memory is 3, not
        # the trace-error status 1. A 1M-event trace needs ~50 MiB to load; under a 32 MiB
        # address-space limit that fails, while a 10-event trace replays.
        rc, out, _ = run("replay", "--help")
        self.assertEqual(rc, 0)
        status = out[out.index("exit status:"):]
        self.assertIn("1 unreadable/truncated/corrupt trace", status)
        self.assertIn("3 out of memory", status)
        m = tw()
        small = os.path.join(self.dir.name, "small.gmt")
        big = os.path.join(self.dir.name, "big.gmt")
        for path, n in ((small, 10), (big, 1000000)):
            with m.TraceWriter(path, pid=1, host="t", exe="big") as w:
                for i in range(n):
                    w.record(m.ALLOC, ptr=0x100000000 + i * 4096, size=512, time_ns=i)

        def limited(path):
            def limit():
                import resource
                resource.setrlimit(resource.RLIMIT_AS, (32 << 20, 32 << 20))
            return subprocess.run([CLI, "replay", path], capture_output=True, text=True, timeout=300,
                                  preexec_fn=limit)
        if limited(small).returncode != 0:
            self.skipTest("the CLI cannot start under a 32 MiB address-space limit (sanitizer build)")
        p = limited(big)
        self.assertIn("out of memory", p.stderr)
        self.assertEqual(p.returncode, 3, p.stderr)

    def test_help(self):
        rc, out, _ = run("--help")
        self.assertEqual(rc, 0)
        self.assertIn("replay TRACE", out)
        rc, out, _ = run("replay", "--help")
        self.assertEqual(rc, 0)
        for opt in ("--conf", "--capacity", "--json", "--sweep", "--jobs"):
            self.assertIn(opt, out)
        rc, _, err = run("frobnicate")
        self.assertEqual(rc, 2)
        self.assertIn("unknown command", err)

    def test_defaults_by_hand(self):
        rc, out, err = run("replay", self.t1, "--json")
        self.assertEqual(rc, 0, err)
        _, d = stats_of(out)
        ms = d["memory_stats"]
        self.assertEqual(len(ms), 122)
        self.assertEqual(ms["reserved_bytes.all.peak"], 48 * MiB)
        self.assertEqual(ms["allocated_bytes.all.peak"], 38 * MiB + 1024)
        # requested peak: 1000 + 12 MiB + 25 MiB (b freed before d)
        self.assertEqual(ms["requested_bytes.all.peak"], 1000 + 37 * MiB)
        self.assertEqual(ms["num_device_alloc"], 3)
        self.assertEqual(ms["segment.all.peak"], 3)
        self.assertEqual(ms["num_ooms"], 0)
        self.assertEqual(ms["max_split_size"], -1)

    def test_text_output(self):
        rc, out, err = run("replay", self.t1)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"peak reserved\s+48\.00 MiB\s+\(50331648 B\)")
        self.assertRegex(out, r"peak allocated\s+38\.00 MiB\s+\(39846912 B\)")
        self.assertRegex(out, r"device alloc / free calls\s+3 / 0")

    def test_conf_max_split(self):
        rc, out, err = run("replay", self.t1, "--conf", "max_split_size_mb:20", "--json")
        self.assertEqual(rc, 0, err)
        _, d = stats_of(out)
        ms = d["memory_stats"]
        self.assertEqual(ms["reserved_bytes.all.peak"], 68 * MiB)
        self.assertEqual(ms["num_device_alloc"], 4)
        self.assertEqual(ms["max_split_size"], 20 * MiB)
        # oversize_segments counts segments of >= max_split_size bytes: b's 20 MiB, d's 26 MiB and
        # e's 20 MiB are all live at the end -> peak 3; oversize_allocations: d (26 MiB block) only.
        self.assertEqual(ms["oversize_segments.peak"], 3)
        self.assertEqual(ms["oversize_allocations.peak"], 1)

    def test_capacity_release_available(self):
        rc, out, err = run("replay", self.t1, "--conf", "max_split_size_mb:20", "--capacity", "60M", "--json")
        self.assertEqual(rc, 0, err)
        _, d = stats_of(out)
        ms = d["memory_stats"]
        self.assertEqual(d["capacity"], 60 * MiB)
        self.assertEqual(ms["reserved_bytes.all.peak"], 48 * MiB)
        self.assertEqual(ms["num_device_alloc"], 4)
        self.assertEqual(ms["num_device_free"], 1)
        self.assertEqual(ms["num_ooms"], 0)
        self.assertEqual(ms["num_alloc_retries"], 0)

    def test_capacity_oom(self):
        rc, out, err = run("replay", self.t1, "--capacity", "40M", "--json")
        self.assertEqual(rc, 0, err)
        _, d = stats_of(out)
        ms = d["memory_stats"]
        self.assertEqual(ms["reserved_bytes.all.peak"], 22 * MiB)
        self.assertEqual(ms["num_ooms"], 2)
        self.assertEqual(ms["num_alloc_retries"], 2)
        self.assertEqual(d["replay"]["failed_allocs"], 2)
        self.assertEqual(d["replay"]["skipped_frees"], 1)

    def test_bad_conf(self):
        rc, out, err = run("replay", self.t1, "--conf", "max_split_size_mb:abc")
        self.assertEqual(rc, 2)
        self.assertIn("max_split_size_mb", err)
        self.assertEqual(out, "")
        rc, _, err = run("replay", self.t1, "--conf", "no_such_key:1")
        self.assertEqual(rc, 2)
        self.assertIn("no_such_key", err)

    def test_bad_arguments(self):
        self.assertEqual(run("replay")[0], 2)
        rc, _, err = run("replay", self.t1, "--capacity", "lots")
        self.assertEqual(rc, 2)
        self.assertIn("--capacity", err)
        self.assertEqual(run("replay", self.t1, "--bogus")[0], 2)

    def test_truncated_trace(self):
        data = read_bytes(self.t1)
        cut = os.path.join(self.dir.name, "cut.gmt")
        write_bytes(cut, data[:-30])  # inside the last event block (the end record is 18 bytes)
        rc, out, err = run("replay", cut)
        self.assertEqual(rc, 1)
        self.assertIn("byte offset %d: file ends inside the block" % (len(data) - 30), err)
        self.assertIn("--allow-truncated", err)
        rc, out, err = run("replay", cut, "--allow-truncated", "--json")
        self.assertEqual(rc, 0, err)
        doc, d = stats_of(out)
        # Blocks of 3 events: the cut loses the last block (event 7), keeping steps 1-6: peak 48 MiB.
        self.assertEqual(doc["events"], 6)
        self.assertEqual(d["memory_stats"]["reserved_bytes.all.peak"], 48 * MiB)

    def test_corrupt_and_version(self):
        data = bytearray(read_bytes(self.t1))
        body = struct.unpack_from("<I", data, 12)[0]
        first_block = 16 + body + 4
        bad = bytearray(data)
        bad[first_block + 16 + 1] ^= 0xFF
        path = os.path.join(self.dir.name, "bad.gmt")
        write_bytes(path, bad)
        rc, _, err = run("replay", path)
        self.assertEqual(rc, 1)
        self.assertIn("byte offset %d: block CRC mismatch" % first_block, err)
        ver = bytearray(data)
        struct.pack_into("<I", ver, 8, 9)
        write_bytes(path, ver)
        rc, _, err = run("replay", path)
        self.assertEqual(rc, 1)
        self.assertIn("byte offset 8: unsupported trace format version 9", err)
        write_bytes(path, b"hello")
        rc, _, err = run("replay", path)
        self.assertEqual(rc, 1)
        self.assertIn("not a gpumemprof trace", err)
        rc, _, err = run("replay", os.path.join(self.dir.name, "missing.gmt"))
        self.assertEqual(rc, 1)
        self.assertIn("cannot open", err)

    def test_report_of_a_version_1_trace(self):
        # The snapshot converter writes version 1: no stack blocks, every event under stack 0.
        self.assertEqual(struct.unpack_from("<I", read_bytes(self.t1), 8)[0], 1)
        html, txt = os.path.join(self.dir.name, "t1.html"), os.path.join(self.dir.name, "t1-report.txt")
        rc, out, err = run("report", self.t1, "--html", html, "--txt", txt)
        self.assertEqual(rc, 0, err)
        self.assertIn("7 events, 1 call sites (0 named by the trace's stacks)", out)
        text = open(txt).read()
        # Used bytes: every block handed out, 1000 + 3 + 12 + 25 + 6 MiB; no segment events: 0 acquired.
        self.assertIn("_root (46.00MB, 0.00B)", text)
        # Live at exit: a, c and e = 1000 B + 18 MiB, in 3 blocks, under the one site without a stack.
        self.assertIn("#1 18.00 MiB (%d bytes) leaked in 3 blocks" % (18 * MiB + 1000), text)
        page = open(html, encoding="utf-8").read()
        data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
        dev = data["devices"][0]
        # Allocated peaks after step 5 (event time 1004; time zero is the first event, 1000):
        # a + c + d = 1000 B + 37 MiB.
        self.assertEqual((dev["peak"]["allocated"], dev["peak"]["allocated_t"]), (37 * MiB + 1000, 4))
        # Changes: 5 allocations, 2 frees (allocated and waiting each), and the PyTorch model's
        # reserved bytes growing 3 times (its 2, 20 and 26 MiB segments, as worked out above).
        self.assertEqual(dev["series"]["changes"], 5 + 2 * 2 + 3)
        self.assertEqual(max(dev["series"]["model_reserved"]["max"]), 48 * MiB)
        self.assertEqual(dev["events"]["action"], [0, 0, 0, 1, 0, 1, 0])
        self.assertEqual(run("report")[0], 2)
        self.assertEqual(run("report", os.path.join(self.dir.name, "missing.gmt"))[0], 1)

    def test_sweep(self):
        rc, out, err = run("replay", self.t1, "--sweep", "--jobs", "2", "--json")
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        res = doc["results"]
        keys = [(r["num_ooms"], r["reserved_bytes_peak"], r["num_device_alloc"]) for r in res]
        self.assertEqual(keys, sorted(keys))  # ranked
        by_conf = {r["conf"]: r for r in res}
        self.assertEqual(by_conf[""]["reserved_bytes_peak"], 48 * MiB)                    # by hand, above
        self.assertEqual(by_conf["max_split_size_mb:20"]["reserved_bytes_peak"], 68 * MiB)  # by hand, above
        self.assertLessEqual(res[0]["reserved_bytes_peak"], 48 * MiB)
        self.assertEqual(doc["recommended"], res[0]["conf"])
        # The text table: header, then the best setting as its first row.
        rc, out, err = run("replay", self.t1, "--sweep", "--top", "5")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertTrue(lines[0].lstrip().startswith("rank"))
        first = lines[1].split()
        self.assertEqual(first[0], "1")
        best = res[0]["conf"] or "(PyTorch defaults)"
        self.assertTrue(lines[1].rstrip().endswith(best) or (best + "  <- recorded") in lines[1], lines[1])
        self.assertTrue(any(l.startswith("recommended:") for l in lines))

    def test_replay_expandable(self):
        # T1 with expandable_segments:True (one range per pool, 2 MiB / 20 MiB pages, blocks split at
        # any remainder >= 512 B):
        #   1 a 1024 B: small range, one 2 MiB page                                  reserved  2 MiB
        #   2 b 3 MiB: large range, one 20 MiB page; 17 MiB free behind b            reserved 22 MiB
        #   3 c 12 MiB: the free 17 MiB (5 MiB left at 15..20 MiB)
        #   4 free b: 3 MiB free at 0..3 MiB
        #   5 d 25 MiB: the free 5 MiB at the end plus one more page mapped: 25 MiB  reserved 42 MiB
        #   6 free d; 7 e 6 MiB: the free 25 MiB, split
        # peak 42 MiB (the default policy: 48 MiB), 3 maps, no segment counted.
        rc, out, err = run("replay", self.t1, "--conf", "expandable_segments:True", "--json")
        self.assertEqual(rc, 0, err)
        doc, dev = stats_of(out)
        ms = dev["memory_stats"]
        self.assertEqual(ms["reserved_bytes.all.peak"], 42 * MiB)
        self.assertEqual(ms["reserved_bytes.small_pool.peak"], 2 * MiB)
        self.assertEqual(ms["num_device_alloc"], 3)
        self.assertEqual(ms["segment.all.peak"], 0)
        self.assertEqual(ms["allocated_bytes.all.peak"], 1024 + 12 * MiB + 25 * MiB)
        self.assertEqual(ms["num_ooms"], 0)
        # --capacity 40M: step 5 would map a third 20 MiB page (22 + 20 > 40 MiB). No whole free page
        # to unmap (free: 0..3 and 15..20 MiB of the first page): out of memory, the retry counted;
        # d's free is skipped; step 7 finds no free 6 MiB and cannot map either: a second OOM.
        rc, out, err = run("replay", self.t1, "--conf", "expandable_segments:True", "--capacity", "40M", "--json")
        self.assertEqual(rc, 0, err)
        ms = stats_of(out)[1]["memory_stats"]
        self.assertEqual(ms["reserved_bytes.all.peak"], 22 * MiB)
        self.assertEqual(ms["num_ooms"], 2)
        self.assertEqual(ms["num_alloc_retries"], 2)

    def test_sweep_ranks_expandable(self):
        # On T1 the expandable setting beats every other of the grid (42 MiB, above; the defaults and
        # the roundings 48 MiB): ranked first and recommended, as the shortest of the ties.
        rc, out, err = run("replay", self.t1, "--sweep", "--json")
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        by_conf = {r["conf"]: r for r in doc["results"]}
        self.assertEqual(by_conf["expandable_segments:True"]["reserved_bytes_peak"], 42 * MiB)
        self.assertEqual(by_conf[""]["reserved_bytes_peak"], 48 * MiB)
        self.assertEqual(doc["results"][0]["conf"], "expandable_segments:True")
        self.assertEqual(doc["recommended"], "expandable_segments:True")
        self.assertIn("expandable_segments:True,roundup_power2_divisions:4", by_conf)

    def test_sweep_recommends_defaults_when_nothing_beats_them(self):
        # Two streams never share cached blocks: 3 MiB on stream 1 (20 MiB segment), then, on stream
        # 2 after the 3 MiB block is freed, 12 MiB: default policy: new 12 MiB segment -> peak
        # 2 + 20 + 12 = 34 MiB with a 1000 B block on stream 0 (2 MiB segment). With
        # roundup_power2_divisions:2 nothing changes for 12 MiB (8 MiB floor, step 4 MiB: 12 MiB
        # exact), so this only checks that the defaults are recommended when nothing beats them.
        m = tw()
        path = os.path.join(self.dir.name, "t2.gmt")
        with m.TraceWriter(path) as w:
            w.record(m.ALLOC, stream=0, ptr=0x1000, size=1000)
            w.record(m.ALLOC, stream=1, ptr=0x2000, size=3 * MiB)
            w.record(m.FREE_REQUESTED, stream=1, ptr=0x2000, size=3 * MiB)
            w.record(m.ALLOC, stream=2, ptr=0x3000, size=12 * MiB)
        rc, out, err = run("replay", path, "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(stats_of(out)[1]["memory_stats"]["reserved_bytes.all.peak"], 34 * MiB)
        rc, out, err = run("replay", path, "--sweep")
        self.assertEqual(rc, 0, err)
        self.assertIn("recommended: PyTorch's defaults", out)

    def test_sweep_finds_max_split(self):
        # 1 alloc X 100 MiB (100 MiB segment), 2 free X, 3 alloc s 5 MiB, 4 alloc Y 100 MiB.
        # Defaults: s splits the cached 100 MiB block (95 MiB left), Y needs a new 100 MiB
        #   segment -> peak reserved 200 MiB, 2 device allocs.
        # max_split_size_mb:20 (or 32, 64): s may not take the oversize 100 MiB block -> new
        #   20 MiB segment; Y (oversize) takes the cached 100 MiB block (100 < 100 + 20 MiB)
        #   -> 120 MiB, 2 device allocs. Ties go to the fewest keys, then grid order: 20 first.
        m = tw()
        path = os.path.join(self.dir.name, "t3.gmt")
        with m.TraceWriter(path) as w:
            w.record(m.ALLOC, ptr=0x1000, size=100 * MiB)
            w.record(m.FREE_REQUESTED, ptr=0x1000, size=100 * MiB)
            w.record(m.ALLOC, ptr=0x2000, size=5 * MiB)
            w.record(m.ALLOC, ptr=0x3000, size=100 * MiB)
        # Beaten on device calls by expandable_segments:True,roundup_power2_divisions:4: X rounds to
        #   112 MiB (64 MiB floor, 16 MiB steps): six 20 MiB pages (120 MiB) in one map; freed, s takes
        #   5 MiB of the 120 and Y (112 MiB) the 115 behind it: 120 MiB, 1 device call. (Expandable
        #   alone: Y needs one more page behind the 95 MiB left: 120 MiB in 2 calls, a tie with
        #   max_split_size_mb:20 that the grid order breaks for the latter.)
        rc, out, err = run("replay", path, "--sweep")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertRegex(lines[1], r"^\s+1\s+120\.00 MiB .*  1\s+0  expandable_segments:True,roundup_power2_divisions:4$")
        rc, out2, err = run("replay", path, "--sweep", "--json")
        by_conf = {r["conf"]: r for r in json.loads(out2)["results"]}
        self.assertEqual((by_conf["max_split_size_mb:20"]["reserved_bytes_peak"],
                          by_conf["max_split_size_mb:20"]["num_device_alloc"]), (120 * MiB, 2))
        self.assertEqual((by_conf["expandable_segments:True"]["reserved_bytes_peak"],
                          by_conf["expandable_segments:True"]["num_device_alloc"]), (120 * MiB, 2))
        self.assertIn("recommended: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,roundup_power2_divisions:4", out)
        self.assertRegex(out, r"peak reserved 120\.00 MiB vs 200\.00 MiB with the defaults, 40\.0% less")


class Converter(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def convert(self, *extra):
        snap = os.path.join(self.dir.name, "s.pickle")
        out = os.path.join(self.dir.name, "s.gmt")
        subprocess.run([sys.executable, os.path.join(SCRIPTS, "make_test_snapshot.py"), snap] + list(extra), check=True)
        p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "torch_snapshot_to_trace.py"), snap, out],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return out, p.stdout

    def test_basic_snapshot_round_trip(self):
        # make_test_snapshot.py's "basic" history (see its docstring). Replay (defaults):
        #   live A 3 MiB   -> 20 MiB segment (split, 17 MiB tail)     reserved 20 MiB
        #   live B 1000 B  -> 2 MiB small segment                     reserved 22 MiB
        #   D 5 MiB        -> from A's 17 MiB tail (12 MiB left)
        #   C 14 MiB       -> 12 MiB tail too small: new 14 MiB seg   reserved 36 MiB
        #   free B, free D; the OOM entry has no allocation to replay.
        #   allocated peak 3 + 5 + 14 MiB + 1024 (B rounded) = 22 MiB + 1024
        #   requested peak 3 + 5 + 14 MiB + 1000
        #   PyTorch's own peak: final segments 20 + 2 + 14 = 36 MiB; the trace's net growth is
        #   +14 MiB, so 22 MiB before recording, peak 36 MiB.
        out, msg = self.convert()
        self.assertIn("2 blocks live before recording", msg)
        rc, js, err = run("replay", out, "--json")
        self.assertEqual(rc, 0, err)
        doc, d0 = stats_of(js, 0)
        self.assertEqual(doc["live_blocks"], 2)
        self.assertEqual(doc["unmatched_frees"], 0)
        self.assertEqual(doc["events"], 2 + 8 + 4)  # 2 live blocks, 8 device-0 entries, 4 device-1
        ms = d0["memory_stats"]
        self.assertEqual(ms["reserved_bytes.all.peak"], 36 * MiB)
        self.assertEqual(ms["allocated_bytes.all.peak"], 22 * MiB + 1024)
        self.assertEqual(ms["requested_bytes.all.peak"], 22 * MiB + 1000)
        self.assertEqual(d0["recorded"]["reserved_bytes_peak"], 36 * MiB)
        self.assertEqual(d0["recorded"]["ooms"], 1)
        _, d1 = stats_of(js, 1)
        self.assertEqual(d1["memory_stats"]["reserved_bytes.all.peak"], 2 * MiB)
        self.assertEqual(d1["memory_stats"]["allocated_bytes.all.peak"], 512)

    def test_recorded_settings_are_the_default(self):
        out, _ = self.convert("--conf", "max_split_size_mb:20")
        rc, js, err = run("replay", out, "--json")
        self.assertEqual(rc, 0, err)
        doc, d0 = stats_of(js, 0)
        self.assertEqual(doc["conf"], "max_split_size_mb:20")
        self.assertEqual(d0["memory_stats"]["max_split_size"], 20 * MiB)

    def test_every_field_round_trips_through_the_cpp_reader(self):
        # Python writer -> C++ reader: an oom with device_free, a live_block with block_size >
        # size, device and stream changes, 64-bit extremes; check via the replay's accounting.
        m = tw()
        path = os.path.join(self.dir.name, "f.gmt")
        with m.TraceWriter(path, pid=77, host="h", exe="e", alloc_conf="", devices=[(5, 3 << 30)],
                           metadata=[("k", "v")], events_per_block=2) as w:
            w.record(m.LIVE_BLOCK, device=5, stream=(1 << 64) - 1, ptr=(1 << 64) - 4096, size=700, block_size=1024)
            w.record(m.SEGMENT_ALLOC, device=5, ptr=1 << 40, size=20 * MiB, time_ns=10)
            w.record(m.ALLOC, device=5, stream=3, ptr=1 << 40, size=5 * MiB, stack_id=9, time_ns=5)
            w.record(m.OOM, device=5, size=1 << 40, device_free=12345, time_ns=20)
            w.record(m.VMM_MAP, device=5, ptr=1 << 41, size=2 * MiB, time_ns=30)
            w.record(m.VMM_UNMAP, device=5, ptr=1 << 41, size=2 * MiB, time_ns=31)
            w.record(m.FREE_REQUESTED, device=5, stream=3, ptr=1 << 40, size=5 * MiB, time_ns=40)
            w.record(m.FREE_COMPLETED, device=5, stream=3, ptr=1 << 40, size=5 * MiB, time_ns=41)
            w.record(m.SEGMENT_FREE, device=5, ptr=1 << 40, size=20 * MiB, time_ns=42)
            w.record(m.DEVICE_INFO, device=6, size=7 << 30, time_ns=43)
        rc, js, err = run("replay", path, "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(stats_of(js, 6)[1]["capacity"], 7 << 30)         # device_info event
        doc, d = stats_of(js, 5)
        self.assertEqual(doc["events"], 10)
        self.assertTrue(doc["complete"])
        self.assertEqual(d["capacity"], 3 << 30)                       # header device capacity
        self.assertEqual(d["recorded"]["segment_allocs"], 2)            # segment_alloc + vmm_map
        self.assertEqual(d["recorded"]["segment_frees"], 2)
        self.assertEqual(d["recorded"]["ooms"], 1)
        self.assertEqual(d["replay"]["alloc_requests"], 2)              # live_block + alloc
        # 700 B -> 2 MiB small segment; 5 MiB -> 20 MiB segment: 22 MiB; 700 rounds to 1024.
        self.assertEqual(d["memory_stats"]["reserved_bytes.all.peak"], 22 * MiB)
        self.assertEqual(d["memory_stats"]["allocated_bytes.all.peak"], 5 * MiB + 1024)

    def test_unpickler_imports_nothing(self):
        # A pickle that would run os.system on a normal unpickler: here it is inert.
        marker = os.path.join(self.dir.name, "pwned")
        evil = os.path.join(self.dir.name, "evil.pickle")
        payload = b"cos\nsystem\n(V" + ("touch " + marker).encode() + b"\ntR."
        write_bytes(evil, payload)
        p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "torch_snapshot_to_trace.py"), evil,
                            os.path.join(self.dir.name, "o.gmt")], capture_output=True, text=True)
        self.assertFalse(os.path.exists(marker))
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a PyTorch memory snapshot", p.stderr)
        # Unknown classes inside a real snapshot are tolerated.
        snap = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0,
                                                    "time_us": 1}]]}
        raw = pickle.dumps(snap, protocol=2)  # protocol 2: no FRAME opcodes to keep aligned
        odd = os.path.join(self.dir.name, "odd.pickle")
        write_bytes(odd, b"\x80\x02" + b"cnotamodule\nNotAClass\n)R0" + raw[2:])
        p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "torch_snapshot_to_trace.py"), odd,
                            os.path.join(self.dir.name, "o.gmt")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    CLI, SCRIPTS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    del sys.argv[1:3]
    unittest.main(verbosity=2)
