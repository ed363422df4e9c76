# SPDX-License-Identifier: MIT
"""GPU check helpers for the HTML report and the PyTorch snapshot (<prefix>.html, <prefix>.pickle)
of a real run: read the page's data, open it in headless Chromium when the machine has one
(screenshots of the timeline, the flame graph and the stacked views by kind and by the driver's
buckets), and load the pickle with PyTorch's own
torch.cuda._memory_viz. Used by gpu_check.py (check "html"); runnable alone:
    python3 html_check.py REPORT.html [REPORT.pickle] [OUT_DIR]"""
import html.parser
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile


def page_data(path):
    """The JSON the page draws from, with a few figures a user would look at."""
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    data = json.loads(m.group(1).replace("<\\/", "</"))
    devs = data["devices"]
    return data, {
        "bytes": os.path.getsize(path),
        "sites": len(data["sites"]),
        "frames": len(data["frames"]),
        "python_frames": sum(1 for f in data["frames"] if len(f) > 5 and f[5] == "python"),
        "devices": [{"device": d["device"], "series_changes": d["series"]["changes"],
                     "buckets": len(d["series"]["t0"]), "bucket_ns": d["series"]["bucket_ns"],
                     "peak_allocated": d["peak"]["allocated"], "peak_allocated_s": d["peak"]["allocated_t"] / 1e9,
                     "stats_allocated_peak": d["memory_stats"]["allocated_bytes.all.peak"],
                     "events_kept": len(d["events"]["t"]), "events_overwritten": d["events"]["overwritten"],
                     "markers": len(d["markers"]),
                     "kind_points": len(d["kinds"]["t"]) if d.get("kinds") else 0} for d in devs],
        "accounting_readings": [len(a["t"]) for a in data.get("accounting", [])],
        "oom_splits": sum(1 for o in data.get("ooms", []) if o.get("accounting") or o.get("kinds")),
    }


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


class _Attrs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def browser(path, out_dir):
    """Open the page headless: DOM figures, and screenshots of the timeline and the flame graph.
    None when no Chromium is installed."""
    exe = chromium_path()
    if not exe:
        return None
    os.makedirs(out_dir, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="chromium-")
    url = "file://" + os.path.abspath(path)
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
              "--user-data-dir=" + profile, "--window-size=1600,1100"]
    res = {"chromium": exe}
    try:
        p = subprocess.run(common + ["--enable-logging=stderr", "--v=0", "--dump-dom", url],
                           capture_output=True, text=True, timeout=300)
        for name, frag in (("timeline", ""), ("flamegraph", "#view=sec-flame"), ("kinds", "#view=sec-kinds"),
                           ("accounting", "#view=sec-accounting")):
            shot = os.path.join(out_dir, "torch-report-%s.png" % name)
            subprocess.run(common + ["--screenshot=" + shot, url + frag], capture_output=True, timeout=300)
            res[name + "_png"] = shot if os.path.exists(shot) else None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    a = _Attrs()
    a.feed(p.stdout)
    body = [at for tag, at in a.found if tag == "body"]
    charts = [at for tag, at in a.found if "chart" in at.get("class", "").split()]
    stacked = [at for tag, at in a.found if "stacked-chart" in at.get("class", "").split()]
    boxes = [at for tag, at in a.found if "fg" in at.get("class", "").split()]
    errors = re.search(r'<ul id="errors"[^>]*>(.*?)</ul>', p.stdout, re.S)
    res.update({
        "ready": bool(body and body[0].get("data-ready") == "1"),
        "load_ms": int(body[0].get("data-load-ms", -1)) if body else None,
        "errors": re.sub("<[^>]+>", " ", errors.group(1)).strip() if errors else "no errors element",
        "console": [l for l in p.stderr.splitlines() if ":CONSOLE(" in l][:5],
        "chart_points": [int(c.get("data-points", 0)) for c in charts],
        # The stacked views (by kind, by the driver's buckets): points drawn, highest stack.
        "stacked": [{"kind": c.get("data-kind"), "device": c.get("data-device"), "points": int(c.get("data-points", 0)),
                     "peak_total": int(c.get("data-peak-total", 0)), "layers": int(c.get("data-layers", 0))}
                    for c in stacked],
        "flame_boxes": len(boxes),
        "flame_root_bytes": next((int(b["data-bytes"]) for b in boxes if b.get("data-label") == "all"), None),
    })
    return res


def memory_viz(path):
    """Load the pickle with torch.cuda._memory_viz's own readers (those that need no network)."""
    import torch.cuda._memory_viz as mv
    with open(path, "rb") as f:
        snap = pickle.load(f)
    out = {"segments": len(snap["segments"]), "trace_events": sum(len(t) for t in snap["device_traces"])}
    for name, fn in (("segsum", lambda: mv.segsum(snap)), ("trace", lambda: mv.trace(snap)),
                     ("trace_plot", lambda: mv.trace_plot(snap)), ("segment_plot", lambda: mv.segment_plot(snap))):
        try:
            out[name + "_chars"] = len(fn())
        except Exception as e:  # noqa: BLE001 - the check reports whatever the viewer raised
            out[name + "_error"] = "%s: %s" % (type(e).__name__, e)
    return out


if __name__ == "__main__":
    _, summary = page_data(sys.argv[1])
    print(json.dumps(summary, indent=1))
    out_dir = sys.argv[3] if len(sys.argv) > 3 else "."
    print(json.dumps(browser(sys.argv[1], out_dir), indent=1))
    if len(sys.argv) > 2 and sys.argv[2]:
        print(json.dumps(memory_viz(sys.argv[2]), indent=1))
