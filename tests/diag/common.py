"""Helpers shared by the diag test scripts (run_hang.py, run_report.py), which import it from
their own directory (a script's directory is first on sys.path when ctest runs it)."""
import os
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def site_line(src, marker):
    """"file.c:N": the line of `src` that carries the comment /* SITE:marker */."""
    with open(src) as f:
        for i, line in enumerate(f, 1):
            if f"/* SITE:{marker} */" in line:
                return f"{os.path.basename(src)}:{i}"
    fail(f"no SITE:{marker} in {src}")
