#!/usr/bin/env python3
"""Checks a libhier report: every named function was carried out by libhier's engine
("packed") at least once. Proves the preloaded path ran, not only the MPI's own."""
import json
import sys

report, names = sys.argv[1], sys.argv[2:]
with open(report) as f:
    fns = json.load(f)["functions"]
bad = [n for n in names if fns.get(n, {}).get("algorithms", {}).get("packed", {}).get("calls", 0) == 0]
for n in names:
    print(n, fns.get(n, {}).get("algorithms"))
if bad:
    sys.exit("not carried out by libhier: " + ", ".join(bad))
