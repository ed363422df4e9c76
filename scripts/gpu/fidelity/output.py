# SPDX-License-Identifier: MIT
"""The results of the runs: a table on stdout, a Markdown table for the README, the summary."""

import math


def human(n):
    if n is None:
        return "-"
    v, u = float(n), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while abs(v) >= 1024 and u < 4:
        v /= 1024
        u += 1
    return "%d B" % n if u == 0 else "%.2f %s" % (v, units[u])


def pct(d):
    if d is None:
        return "-"
    if math.isinf(d):
        return "inf"
    return "%+.3f%%" % (100 * d)


def print_table(runs):
    head = ["workload", "conf", "torch reserved", "replay reserved", "diff", "torch alloc", "replay alloc",
            "diff", "dev allocs t/r", "result"]
    rows = []
    for r in runs:
        ts, rp = r.get("torch") or {}, r.get("replay") or {}
        rows.append([r["workload"], r["conf"] or "(defaults)", human(ts.get("reserved_bytes.all.peak")),
                     human(rp.get("reserved_bytes.all.peak")), pct(r["reserved_rel_diff"]),
                     human(ts.get("allocated_bytes.all.peak")), human(rp.get("allocated_bytes.all.peak")),
                     pct(r["allocated_rel_diff"]),
                     "%s / %s" % (ts.get("num_device_alloc", "-"), rp.get("num_device_alloc", "-")), r["status"]])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    print()
    print(fmt % tuple(head))
    print(fmt % tuple("-" * w for w in widths))
    for row in rows:
        print(fmt % tuple(row))


def markdown_table(runs):
    def b(n):
        return "-" if n is None else "%d" % n
    lines = ["| workload | PYTORCH_CUDA_ALLOC_CONF | PyTorch reserved peak (B) | replayed reserved peak (B) | diff "
             "| PyTorch allocated peak (B) | replayed allocated peak (B) | diff | cudaMalloc calls PyTorch / replay "
             "| result |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        ts, rp = r.get("torch") or {}, r.get("replay") or {}
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |" % (
            r["workload"], "`%s`" % r["conf"] if r["conf"] else "(defaults)",
            b(ts.get("reserved_bytes.all.peak")), b(rp.get("reserved_bytes.all.peak")), pct(r["reserved_rel_diff"]),
            b(ts.get("allocated_bytes.all.peak")), b(rp.get("allocated_bytes.all.peak")),
            pct(r["allocated_rel_diff"]), ts.get("num_device_alloc", "-"), rp.get("num_device_alloc", "-"),
            r["status"]))
    return "\n".join(lines)
