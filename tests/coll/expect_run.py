#!/usr/bin/env python3
"""Runs a command and checks its exit status and its output (stdout + stderr together).

usage: expect_run.py --status zero|nonzero --regex REGEX [--timeout S] -- cmd...
A test of a message must also check the status: CTest's PASS_REGULAR_EXPRESSION ignores it.
"""
import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--status", choices=["zero", "nonzero"], required=True)
    ap.add_argument("--regex", required=True)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        print(out)
        print(f"expect_run: FAILED: no exit within {a.timeout:.0f} s (a hang)")
        return 1
    print(p.stdout)
    errors = []
    if (p.returncode == 0) != (a.status == "zero"):
        errors.append(f"exit status {p.returncode}, expected {a.status}")
    if not re.search(a.regex, p.stdout):
        errors.append(f"output does not match {a.regex!r}")
    for e in errors:
        print("expect_run: FAILED:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
