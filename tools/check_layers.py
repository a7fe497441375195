#!/usr/bin/python3
"""check_layers — refuses an #include across a forbidden arrow of ARCHITECTURE.md's layer table.

Every layer's headers are included as "<layer>/file.hpp" from the one include root src/, so the
compiler cannot tell an allowed include from a forbidden one; this check can. Usage:
    check_layers.py SRC_DIR        (exit 1 and one line per violation when a rule is broken)
Keep ALLOWED in step with the layout table of ARCHITECTURE.md (and docs' layout table).
"""
import os
import re
import sys

LEAVES = {"base", "util"}
# layer -> the layers it may include besides itself and the leaves.
ALLOWED = {
    "base": set(),
    "util": set(),
    "config": set(),
    "diag": {"config"},
    "device": {"config", "diag"},
    "quant": {"device", "config", "diag"},
    "topo": {"config", "diag"},
    "sched": {"topo", "config", "diag"},
    "model": {"sched", "topo", "config", "diag"},
    "dtype": {"device", "config", "diag", "model"},
    "exec": {"sched", "model", "topo", "dtype", "quant", "device", "config", "diag"},
    "core": None,  # the top: everything below
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main(src):
    bad = []
    layers = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for layer in layers:
        if layer not in ALLOWED:
            bad.append(f"src/{layer}/: a layer that tools/check_layers.py does not know: add it to ALLOWED")
            continue
        rule = ALLOWED[layer]
        for root, _, files in os.walk(os.path.join(src, layer)):
            for name in files:
                if not name.endswith((".cpp", ".hpp", ".h", ".cu", ".hip")):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    dep = m.group(1)
                    if dep not in ALLOWED or dep == layer or dep in LEAVES or rule is None:
                        continue  # not a layer (e.g. hier/fn.hpp, generated), itself, a leaf, or core
                    if dep not in rule:
                        line = text.count("\n", 0, m.start()) + 1
                        rel = os.path.relpath(path, os.path.dirname(src))
                        bad.append(f"{rel}:{line}: {layer}/ may not include {dep}/ "
                                   f"(allowed: {', '.join(sorted(rule | LEAVES)) or 'nothing'})")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: check_layers.py SRC_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
