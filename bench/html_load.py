#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Benchmark: how long headless Chromium takes to load the HTML report of a large run (50,000 call
# sites, 1,000,000 changes of the time series) against a small baseline report loaded in the same
# run (the same page with 10 sites). The page stores performance.now() when its script has drawn
# everything (body data-load-ms: parsing the data, the timeline, the flame graph, trees and tables);
# the wall time of the whole browser process is printed too. Three loads each, best kept.
# Usage: html_load.py BENCH_HTML_BINARY [CHROMIUM]
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def load(chromium, page):
    profile = tempfile.mkdtemp(prefix="chromium-bench-")
    try:
        t0 = time.monotonic()
        p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--user-data-dir=" + profile, "--window-size=1400,1000", "--dump-dom",
                            "file://" + page], capture_output=True, text=True, timeout=300)
        wall = time.monotonic() - t0
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'data-load-ms="(\d+)"', p.stdout)
    errors = re.search(r'<ul id="errors"[^>]*>(.*?)</ul>', p.stdout, re.S)
    if not m or (errors and errors.group(1).strip()):
        sys.exit("page did not finish: %s %s" % (errors.group(1)[:500] if errors else "", p.stderr[-500:]))
    return int(m.group(1)), wall


def main():
    binary = sys.argv[1]
    chromium = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else shutil.which("chromium")
    if not chromium:
        print("SKIP: chromium not found")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([binary, tmp], check=True)
        res = {}
        for name in ("small", "large"):
            page = os.path.join(tmp, "bench-%s.html" % name)
            runs = [load(chromium, page) for _ in range(3)]
            res[name] = (min(r[0] for r in runs), min(r[1] for r in runs), os.path.getsize(page))
            print("%s report (%.1f MB): page ready after %d ms (best of 3), browser process %.2f s" %
                  (name, res[name][2] / 1e6, res[name][0], res[name][1]))
        s, l = res["small"], res["large"]
        print("large / small: page ready %.1fx (%d ms vs %d ms), browser process %.2fx" %
              (l[0] / max(s[0], 1), l[0], s[0], l[1] / s[1]))
        print("target: the large report ready in < 3000 ms: %s" % ("met" if l[0] < 3000 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
