# SPDX-License-Identifier: MIT
"""Checks by value for the test runners: each prints "ok" or "FAIL" with what it checked (and,
when it fails, what was found instead), and the failures are kept for the exit status."""


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, what, cond, detail=""):
        print("  %s %s%s" % ("ok  " if cond else "FAIL", what, "" if cond else "  " + str(detail)[:3000]))
        if not cond:
            self.failures.append(what)
        return cond
