#!/usr/bin/python3
"""The rows of src/config/collectives.def, for the Python tools (bench/, tools/).

The table is the one list of the collectives libhier rewrites; the C++ side expands it as an
X-macro, the Python side reads it here, so that no script keeps its own list of collectives.
The column names are the table's own header comment (`//   HIER_COLL(Name, key, ...):`), so a
new column needs no change here.

    import collectives
    for row in collectives.rows():      # in the table's order (config::Coll)
        row["key"], row["Op"], row["Cartesian"]   # parenthesized lists come back as lists

    collectives.py [--def PATH] [--hier-info PROGRAM]   prints the keys; with --hier-info, exits 1
                                                       unless the compiled table lists the same
    collectives.py --sim-bytes KEY BYTES RANKS         hier-sim's --bytes for a hier-bench size
"""
import argparse
import os
import re
import subprocess
import sys

DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "config", "collectives.def")


def _split(args):
    """Top-level comma-separated values; a parenthesized one becomes a list of its words."""
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    out.append(cur.strip())
    return [re.findall(r"\w+", v) if v.startswith("(") else v for v in out]


def rows(path=DEF):
    """One dict per row, keyed by the header's column names; SystemExit on a row that lacks one."""
    with open(path) as f:
        text = f.read()
    head = re.search(r"^//\s*HIER_COLL\(((?:[^)]|\n//)*)\):", text, re.M)
    if not head:
        raise SystemExit(f"{path}: no header comment '//   HIER_COLL(Name, key, ...):' naming the columns")
    columns = re.findall(r"\w+", head.group(1))
    out = []
    for line in text.splitlines():
        m = re.match(r"^HIER_COLL\((.*)\)\s*$", line)
        if not m:
            continue
        values = _split(m.group(1))
        if len(values) != len(columns):
            raise SystemExit(f"{path}: a row with {len(values)} columns, the header names {len(columns)}: {line}")
        out.append(dict(zip(columns, values)))
    if not out:
        raise SystemExit(f"{path}: no HIER_COLL rows")
    return out


def keys(path=DEF):
    """The collectives' names (HIER_ALGO, hier-bench --colls, hier-sim --coll, the model files)."""
    return [r["key"] for r in rows(path)]


# hier-bench's size (bench/hier-bench/hier_bench.cpp) by the row's kind of argument list (the
# Buffers column): one rank's block, or the whole call's data as the planner counts it (model::Call,
# hier-sim --bytes). Every kind is in one of the two (tests/unit/check_py_tables.py).
BENCH_SIZE_PER_RANK = {"blocks_to_all", "vblocks_to_all", "blocks_exchanged", "blocks_to_root", "blocks_from_root"}
BENCH_SIZE_WHOLE = {"elementwise", "elementwise_to_root", "one_buffer", "reduced_blocks", "reduced_vblocks", "no_buffers"}


def row(key, path=DEF):
    """The row whose key is `key`; SystemExit naming the table's keys where none is."""
    for r in rows(path):
        if r["key"] == key:
            return r
    raise SystemExit(f"collectives.py: no collective '{key}' in {path} (it has: {', '.join(keys(path))})")


def sim_bytes(key, bench_bytes, ranks, path=DEF):
    """The planner's bytes (hier-sim --bytes) of a hier-bench size of `key` on `ranks` ranks."""
    return bench_bytes * (ranks if row(key, path)["Buffers"] in BENCH_SIZE_PER_RANK else 1)


def compiled_keys(hier_info):
    """The keys the compiled table has: hier-info's HIER_ALGO line lists them (config::kCollKeys)."""
    text = subprocess.run([hier_info, "--markdown"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"HIER_ALGO.*?\(collectives: ([a-z_, ]+)\)", text)
    if not m:
        raise SystemExit(f"{hier_info} --markdown: no HIER_ALGO line listing the collectives")
    return [k.strip() for k in m.group(1).split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--def", dest="path", default=DEF)
    ap.add_argument("--hier-info", help="check that this hier-info was built from the same rows")
    ap.add_argument("--sim-bytes", nargs=3, metavar=("KEY", "BYTES", "RANKS"),
                    help="print hier-sim's --bytes for a hier-bench size of KEY on RANKS ranks")
    a = ap.parse_args()
    if a.sim_bytes:
        key, b, n = a.sim_bytes
        print(sim_bytes(key, int(b), int(n), a.path))
        return
    ks = keys(a.path)
    if a.hier_info:
        built = compiled_keys(a.hier_info)
        if built != ks:
            sys.exit(f"collectives.py: {a.path} has {ks}, {a.hier_info} was built with {built}")
    print(" ".join(ks))


if __name__ == "__main__":
    main()
