#!/usr/bin/env python3
"""Runs `hier-info --levels` (the command after --) and checks what rank 0 prints: the shape line
and the groups of each level, e.g.
  check_levels.py --shape "gcd:2 x gpu:2 x world:2" --level gcd "0 1|2 3|4 5|6 7" -- mpiexec ...
A level not named with --level must not be listed; a named one must list exactly those groups."""
import argparse
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--shape", required=True, help="the shape as Shape::describe prints it, before ' ('")
ap.add_argument("--level", nargs=2, action="append", default=[], metavar=("NAME", "GROUPS"),
                help="groups as ranks separated by spaces, groups by |")
ap.add_argument("cmd", nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
out = run.stdout
print(out)
if run.returncode != 0:
    sys.exit(f"check_levels: exit status {run.returncode}")
m = re.search(r"^HIER_LEVELS=\S+ on \d+ ranks: (.*?)(?: \(|$)", out, re.M)
if not m or m.group(1) != a.shape:
    sys.exit(f"check_levels: shape {m.group(1) if m else None!r}, expected {a.shape!r}")
levels = {}  # name -> list of groups (lists of ranks), as printed
for name, body in re.findall(r"^  level (\S+) \(\d+ groups?\):\n((?:    ranks.*\n?)*)", out, re.M):
    levels[name] = sorted([int(r) for r in g.split()] for g in re.findall(r"ranks ([\d ]+?)  \(on", body))
want = {n: sorted([int(r) for r in g.split()] for g in groups.split("|")) for n, groups in a.level}
if levels != want:
    sys.exit(f"check_levels: levels {levels}, expected {want}")
print(f"check_levels: {a.shape}, levels {sorted(levels)} as expected")
