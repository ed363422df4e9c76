# SPDX-License-Identifier: MIT
"""Reading the exit JSON (<prefix>.json, docs/outputs.md) in the tests."""
import json


def expand_frames(report):
    """`report` with each site's and OOM's "frames" (indices into the top-level "frames" table,
    version 2) replaced by the frames themselves, root first, as version 1 wrote them. A report
    without stack sections, or one of version 1, is returned as it is."""
    table = report.get("frames")
    if not isinstance(table, list):
        return report
    for key in ("sites", "ooms"):
        for entry in report.get(key, []):
            entry["frames"] = [table[i] for i in entry.get("frames", [])]
    return report


def load_report(path):
    """The JSON report at `path` (strict UTF-8) with its frames expanded."""
    with open(path, "rb") as f:
        return expand_frames(json.loads(f.read().decode("utf-8")))
