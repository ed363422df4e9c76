#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`gpumemprof merge` and `gpumemprof diff` on a made-up 4-rank job run on the simulated device.

usage: test_merge.py --cli gpumemprof --lib libgpumemprof.so --prog prog_ranks --sim-dir DIR
                     [--asan-runtime libasan.so]

prog_ranks (tests/tools/prog_ranks.cpp) runs once per rank, the four at once, with RANK,
LOCAL_RANK and WORLD_SIZE set. Worked out by hand from its allocations (MiB; sizes of 12 MiB and
more are their own blocks, so allocated bytes are exactly these):
  rank r holds W = 12 (r + 1) (weights), A = 16 (activations), E = 14 r on odd ranks (expert):
    base B = 28, 54, 52, 106 for ranks 0..3
  rank 2 then asks for 4096 MiB on a 1 GiB device: its one OOM, while every rank holds B;
  step s (0, 1, 2): step_buffer 12 (s + 1), cache_grow 12 (kept), step_buffer freed:
    allocated peaks in step s at B + 24 (s + 1); the run's peak is B + 72 at step 2:
    100, 126, 124, 178 MiB: largest rank 3, smallest rank 0, spread 78 MiB.
  At each rank's peak: weights W, activations 16, expert E, step_buffer 36, cache_grow 36.
    spread between ranks: expert 42 (0 on ranks 0 and 2, 42 on rank 3), weights 36 (12 .. 48);
    activations, step_buffer and cache_grow do not differ.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

ARGS = None
MiB = 1 << 20
BASE = {0: 28, 1: 54, 2: 52, 3: 106}
PEAK = {r: b + 72 for r, b in BASE.items()}


def cli(*args):
    p = subprocess.run([ARGS.cli] + [str(a) for a in args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def cli_json(*args):
    rc, out, err = cli(*args, "--json")
    assert rc == 0, (rc, err)
    return json.loads(out)


def run_job(out_dir, ranks=4):
    """The job's ranks at once; returns once all have exited."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(filter(None, [os.path.abspath(ARGS.sim_dir), env.get("LD_LIBRARY_PATH")]))
    env["LD_PRELOAD"] = " ".join(filter(None, [ARGS.asan_runtime, os.path.abspath(ARGS.lib)]))
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    env["SIMCUDA_CAPACITY"] = "1G"
    env["GPUMEMPROF_OUTPUT"] = os.path.join(out_dir, "rank%r")
    env["GPUMEMPROF_TRACE"] = os.path.join(out_dir, "rank%r.gmt")
    env["GPUMEMPROF_STACK_DEPTH"] = "32"
    env["WORLD_SIZE"] = str(ranks)
    for k in ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        env.pop(k, None)
    procs = []
    for r in range(ranks):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r % 2))
        procs.append(subprocess.Popen([ARGS.prog, out_dir, str(ranks)], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for r, p in enumerate(procs):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, "rank %d exited %d:\n%s" % (r, p.returncode, out)


def site(sites, function):
    """The one entry whose site key names `function` (file:line:function)."""
    found = [s for s in sites if s["site"].split(":")[-1].split("(")[0].endswith(function)]
    assert len(found) == 1, (function, [s["site"] for s in sites])
    return found[0]


class Job(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        run_job(cls.dir)
        cls.reports = [os.path.join(cls.dir, "rank%d.json" % r) for r in range(4)]
        cls.traces = [os.path.join(cls.dir, "rank%d.gmt" % r) for r in range(4)]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_reports_record_the_rank_fields(self):
        for r, path in enumerate(self.reports):
            with open(path) as f:
                j = json.load(f)
            self.assertEqual((j["rank"], j["local_rank"], j["world_size"], j["rank_from"]), (r, r % 2, 4, "RANK"))
            self.assertGreater(j["start_time_ns"], 1_600_000_000 * 10**9)  # wall clock, after 2020
            self.assertEqual([s["step"] for s in j["steps"]], [0, 1, 2])
            # What the pool held when each step began: B, B + 12, B + 24 MiB.
            self.assertEqual([s["devices"][0]["allocated"] for s in j["steps"]],
                             [(BASE[r] + 12 * s) * MiB for s in range(3)])

    def check_ranks(self, m, files):
        self.assertEqual([x["rank"] for x in m["ranks"]], [0, 1, 2, 3])
        for x in m["ranks"]:
            r = x["rank"]
            self.assertEqual(x["file"], files[r])
            self.assertEqual(x["peak_allocated"], PEAK[r] * MiB)
            self.assertEqual(x["ooms"], 1 if r == 2 else 0)
            self.assertEqual((x["local_rank"], x["world_size"]), (r % 2, 4))
        self.assertEqual((m["largest"], m["smallest"], m["spread_bytes"]), (3, 0, 78 * MiB))
        # Only the sites that differ, the widest spread first.
        self.assertEqual([s["site"].split(":")[-1].split("(")[0].split("::")[-1] for s in m["sites"]],
                         ["expert", "weights"])
        expert, weights = site(m["sites"], "expert"), site(m["sites"], "weights")
        self.assertEqual(expert["per_rank_bytes"], [0, 14 * MiB, 0, 42 * MiB])
        self.assertEqual((expert["spread_bytes"], expert["min_rank"], expert["max_rank"]), (42 * MiB, 0, 3))
        self.assertEqual(weights["per_rank_bytes"], [12 * MiB, 24 * MiB, 36 * MiB, 48 * MiB])
        self.assertEqual(weights["spread_bytes"], 36 * MiB)
        # Rank 2 ran out first; every rank held its base then (exact timelines: few changes).
        oom = m["first_oom"]
        self.assertEqual((oom["rank"], oom["requested"], oom["aligned"]), (2, 4096 * MiB, True))
        held = {h["rank"]: h for h in oom["held"]}
        for r in range(4):
            self.assertEqual((held[r]["state"], held[r]["allocated"], held[r]["within_ns"]), ("held", BASE[r] * MiB, 0))
        self.assertEqual(len(m["hosts"]), 1)
        self.assertEqual(m["hosts"][0]["ranks"], 4)
        self.assertEqual(m["hosts"][0]["peak_allocated"], sum(PEAK.values()) * MiB)
        self.assertEqual(m["hosts"][0]["ooms"], 1)

    def test_merge_of_the_reports(self):
        m = cli_json("merge", *reversed(self.reports))  # any order: ranks are sorted
        self.check_ranks(m, self.reports)
        # Each rank's figures are its own file's.
        for x in m["ranks"]:
            with open(self.reports[x["rank"]]) as f:
                stats = json.load(f)["devices"][0]["memory_stats"]
            self.assertEqual(x["peak_allocated"], stats["allocated_bytes.all.peak"])
            self.assertEqual(x["peak_reserved"], stats["reserved_bytes.all.peak"])
        self.assertEqual(m["warnings"], [])

    def test_merge_of_the_traces(self):
        self.check_ranks(cli_json("merge", *self.traces), self.traces)

    def test_partial_merges_read_back_give_the_same_merge(self):
        parts = []
        for i, group in enumerate((self.reports[:3], self.reports[3:])):
            rc, out, err = cli("merge", "--partial", *group)
            self.assertEqual(rc, 0, err)
            self.assertEqual(len(out.splitlines()), 1 + len(group))
            parts.append(os.path.join(self.dir, "part%d.jsonl" % i))
            with open(parts[-1], "w") as f:
                f.write(out)
        whole = cli_json("merge", *self.reports)
        self.assertEqual(cli_json("merge", *parts), whole)
        # A partial of partials (a two-level reduce) too.
        rc, out, err = cli("merge", "--partial", *parts)
        self.assertEqual(rc, 0, err)
        again = os.path.join(self.dir, "all.jsonl")
        with open(again, "w") as f:
            f.write(out)
        self.assertEqual(cli_json("merge", again), whole)

    def test_hosts_are_summed_per_host(self):
        rc, out, err = cli("merge", "--partial", *self.reports)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        for i in (3, 4):  # ranks 2 and 3 on another machine
            run = json.loads(lines[i])
            run["host"] = "nodeB"
            lines[i] = json.dumps(run)
        part = os.path.join(self.dir, "hosts.jsonl")
        with open(part, "w") as f:
            f.write("\n".join(lines) + "\n")
        hosts = {h["host"]: h for h in cli_json("merge", part)["hosts"]}
        self.assertEqual(hosts["nodeB"]["ranks"], 2)
        self.assertEqual(hosts["nodeB"]["peak_allocated"], (124 + 178) * MiB)
        self.assertEqual(hosts["nodeB"]["ooms"], 1)
        other = [h for name, h in hosts.items() if name != "nodeB"][0]
        self.assertEqual((other["ranks"], other["peak_allocated"], other["ooms"]), (2, (100 + 126) * MiB, 0))

    def test_text_and_html(self):
        html = os.path.join(self.dir, "job.html")
        rc, out, err = cli("merge", *self.reports, "--html", html)
        self.assertEqual(rc, 0, err)
        self.assertIn("largest peak: rank 3, 178.00 MiB; smallest: rank 0, 100.00 MiB; spread 78.00 MiB", out)
        self.assertIn("first OOM: rank 2", out)
        with open(html) as f:
            page = f.read()
        self.assertEqual(page.count("<svg"), 4)
        self.assertIn("expert", page)

    def test_diff_two_ranks(self):
        d = cli_json("diff", self.reports[0], self.reports[3])
        self.assertEqual(d["peak_allocated"], {"base": 100 * MiB, "new": 178 * MiB, "delta": 78 * MiB})
        sites = d["sites"]
        self.assertEqual([s["site"].split(":")[-1].split("(")[0].split("::")[-1] for s in sites],
                         ["expert", "weights"])
        self.assertEqual((sites[0]["base"], sites[0]["new"], sites[0]["delta"]), (0, 42 * MiB, 42 * MiB))
        self.assertEqual(sites[1]["total"], {"base": 12 * MiB, "new": 48 * MiB, "delta": 36 * MiB})
        self.assertEqual(d["peak_reserved"]["delta"], d["peak_reserved"]["new"] - d["peak_reserved"]["base"])

    def test_the_gate(self):
        # 100 -> 178 MiB is +78%: not more than 78, more than 77.9.
        base, new = self.reports[0], self.reports[3]
        self.assertEqual(cli("diff", base, new, "--fail-if-peak-grows", "78")[0], 0)
        rc, out, _ = cli("diff", base, new, "--fail-if-peak-grows", "77.9")
        self.assertEqual(rc, 1)
        self.assertIn("FAIL", out)
        self.assertEqual(cli("diff", new, base, "--fail-if-peak-grows", "0")[0], 0)  # it shrank
        self.assertEqual(cli("diff", base, base, "--fail-if-peak-grows", "0")[0], 0)
        self.assertEqual(cli("diff", base, new, "--fail-if-peak-grows", "-1")[0], 2)
        self.assertEqual(cli("diff", base, os.path.join(self.dir, "ready.0"))[0], 4)  # not a report

    def test_steps_of_a_trace(self):
        # Rank 1 (B = 54): step 0 peaks at 78, step 2 at 126 MiB; they begin at 54 and 78.
        d = cli_json("diff", self.traces[1], "--steps", "0", "2")
        self.assertEqual(d["peak_allocated"], {"base": 78 * MiB, "new": 126 * MiB, "delta": 48 * MiB})
        self.assertEqual(d["allocated_at_start"], {"base": 54 * MiB, "new": 78 * MiB, "delta": 24 * MiB})
        self.assertTrue(d["exact"])
        by = {s["site"].split(":")[-1].split("(")[0].split("::")[-1]: s for s in d["sites"]}
        self.assertEqual(sorted(by), ["cache_grow", "step_buffer"])
        self.assertEqual((by["step_buffer"]["base"], by["step_buffer"]["new"]), (12 * MiB, 36 * MiB))
        self.assertEqual(by["step_buffer"]["total"], {"base": 12 * MiB, "new": 36 * MiB, "delta": 24 * MiB})
        self.assertEqual((by["cache_grow"]["base"], by["cache_grow"]["new"]), (12 * MiB, 36 * MiB))
        self.assertEqual(by["cache_grow"]["total"]["delta"], 0)  # 12 MiB allocated in each
        self.assertEqual(cli("diff", self.traces[1], "--steps", "0", "2", "--fail-if-peak-grows", "50")[0], 1)
        self.assertEqual(cli("diff", self.traces[1], "--steps", "0", "7")[0], 4)  # no step 7

    def test_steps_of_a_report(self):
        d = cli_json("diff", self.reports[1], "--steps", "0", "2")
        self.assertEqual(d["peak_allocated"], {"base": 78 * MiB, "new": 126 * MiB, "delta": 48 * MiB})
        self.assertEqual(d["allocated_at_start"]["delta"], 24 * MiB)
        self.assertFalse(d["has_sites"])

    def test_bad_input_and_arguments(self):
        self.assertEqual(cli("merge", os.path.join(self.dir, "missing.json"))[0], 4)
        self.assertEqual(cli("merge", os.path.join(self.dir, "ready.0"))[0], 4)
        self.assertEqual(cli("merge")[0], 2)
        self.assertEqual(cli("merge", "--bogus", self.reports[0])[0], 2)
        self.assertEqual(cli("diff", self.reports[0])[0], 2)
        bad = os.path.join(self.dir, "cut.json")
        with open(self.reports[0]) as f, open(bad, "w") as g:
            g.write(f.read()[:1000])
        rc, _, err = cli("merge", bad)
        self.assertEqual(rc, 4)
        self.assertIn("not valid JSON", err)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--sim-dir", required=True)
    ap.add_argument("--asan-runtime", default="")
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
