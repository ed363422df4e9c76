# SPDX-License-Identifier: MIT
"""The replay fidelity check of scripts/gpu/replay_fidelity.py (the command line), in parts:

common    settings, paths and the stat keys both sides use
worker    the fresh process per run that records PyTorch's allocator (torch needed)
case      one run: start the worker, convert its snapshot, replay the trace, judge
judging   whether a recording can be compared (diagnostics) and the PASS/FAIL/INVALID verdict
output    the results as a table and as Markdown
selftest  the same path without torch: synthetic snapshots and checks of the judging
"""
