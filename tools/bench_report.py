#!/usr/bin/python3
"""Turns tools/bench-cluster.sh's raw runs into bench/RESULTS-cluster.md and PNG plots.

Raw files, per MPI, variant and repetition: <mpi>.<variant>.<rep>.csv (hier-bench --csv),
.links (two JSON documents from `minicluster links --json`: before and after the run).
The link-bound floor is the least time the slowest level allows: the bytes each node must send
(or receive) over its link, divided by the link rate.
"""
import argparse
import csv
import glob
import json
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collectives  # noqa: E402  (tools/collectives.py: the rows of src/config/collectives.def)


def rate_bytes_per_s(link):
    m = re.match(r"^([0-9.]+)([kmgt]?)(i?)bit$", link.lower())
    if not m:
        raise SystemExit(f"bench_report: cannot read link rate {link}")
    mult = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    if m.group(3):
        mult = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2)]
    return float(m.group(1)) * mult / 8


# The bytes one node must move over its link (the busier direction) for one call, per kind of
# MPI collective: the table's Op column (src/config/collectives.def: the rounds that cost the
# MPI's own collective), so that a new row with an existing Op needs nothing here. `size` is
# hier-bench's size: the whole vector (reductions, bcast), the block per rank (allgather(v),
# gather, scatter) or per peer (alltoall); n nodes of ppn ranks. A new Op fails here
# (floor_bytes) and in unit.py_tables until it has its formula.
FLOORS = {
    "Allreduce": lambda size, n, ppn: 2 * (n - 1) / n * size,
    "ReduceScatter": lambda size, n, ppn: (n - 1) / n * size,
    "Allgather": lambda size, n, ppn: (n - 1) * ppn * size,  # a node receives every other node's blocks
    "Alltoall": lambda size, n, ppn: ppn * (n - 1) * ppn * size,  # one block per (local, remote) pair
    "Bcast": lambda size, n, ppn: size,
    "Reduce": lambda size, n, ppn: size,
    "Gather": lambda size, n, ppn: (n - 1) * ppn * size,  # the root's node receives the others' blocks
    "Scatter": lambda size, n, ppn: (n - 1) * ppn * size,  # the root's node sends the others' blocks
    "Barrier": lambda size, n, ppn: 0,
}
OP_OF = {r["key"]: r["Op"] for r in collectives.rows()}


def floor_bytes(coll, size, nodes, ppn):
    """Bytes one node must move over its link (the busier direction) for one call."""
    if coll not in OP_OF:
        raise SystemExit(f"bench_report: {coll} is not a collective of src/config/collectives.def")
    if OP_OF[coll] not in FLOORS:
        raise SystemExit(f"bench_report: no link floor for Op {OP_OF[coll]} ({coll}): add it to FLOORS")
    return FLOORS[OP_OF[coll]](size, nodes, ppn) if nodes >= 2 else 0


def read_links(path):
    with open(path) as f:
        text = f.read()
    dec = json.JSONDecoder()
    before, end = dec.raw_decode(text)
    after, _ = dec.raw_decode(text[end:].lstrip())
    b = {r["hostname"]: r["sent_bytes"] for r in before["nodes"]}
    return {r["hostname"]: r["sent_bytes"] - b.get(r["hostname"], 0) for r in after["nodes"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--ppn", type=int, required=True)
    ap.add_argument("--link", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", required=True)
    a = ap.parse_args()
    rate = rate_bytes_per_s(a.link)

    # times[(mpi, coll, bytes)][variant] = [median_us per rep]
    times = defaultdict(lambda: defaultdict(list))
    invalid = []
    for path in sorted(glob.glob(os.path.join(a.raw, "*.csv"))):
        mpi, variant, rep = os.path.basename(path)[:-4].split(".")
        if rep == "focus":
            continue
        with open(path) as f:
            for row in csv.DictReader(f):
                times[(mpi, row["collective"], int(row["bytes"]))][variant].append(float(row["median_us"]))
                if row["valid"] != "1":
                    invalid.append(f"{mpi}/{variant} {row['collective']} {row['bytes']}")

    lines = ["# Collectives on the emulated cluster", "",
             f"{a.nodes} nodes × {a.ppn} ranks, {a.link} links (tools/minicluster), both MPIs, measured in one run.",
             f"Command: `{a.command}`", "",
             "Times are medians (over repetitions) of hier-bench's median per-call time (the slowest rank per call).",
             "`mpi` = the MPI alone (libhier preloaded with HIER_DISABLE=1), `han` = Open MPI's coll/han, `hier` = libhier with every call hierarchical (HIER_ALGO=hier; the planner uses it inside the windows where it wins, see src/sched/tuning.cpp).",
             "`floor` = the link-bound floor: the bytes one node must send over its link divided by the link rate.",
             "Ratios above 1 mean libhier is faster.", ""]
    if invalid:
        lines += ["**Validation failures:** " + ", ".join(invalid), ""]
    failed = os.path.join(a.raw, "failed.txt")
    if os.path.exists(failed):
        with open(failed) as f:
            runs = ", ".join(l.strip() for l in f if l.strip())
        lines += [f"**Runs that failed or timed out (their rows are missing):** {runs}", ""]
    load = os.path.join(a.raw, "load.txt")
    if os.path.exists(load):
        with open(load) as f:
            lines += [f"Machine load when the runs ended (`uptime`): {f.read().strip()}", ""]
    by_mpi_coll = defaultdict(list)
    for (mpi, coll, size), v in times.items():
        by_mpi_coll[(mpi, coll)].append((size, {k: statistics.median(x) for k, x in v.items()}))
    os.makedirs(os.path.join(a.out, "plots"), exist_ok=True)
    for (mpi, coll), rows in sorted(by_mpi_coll.items()):
        rows.sort()
        variants = [v for v in ("mpi", "han", "hier") if any(v in r[1] for r in rows)]
        lines += [f"## {mpi}: {coll}", "",
                  "| bytes | " + " | ".join(f"{v} µs" for v in variants) + " | floor µs | mpi/hier |"
                  + (" han/hier |" if "han" in variants else ""),
                  "|---:|" + "---:|" * (len(variants) + 2 + ("han" in variants))]
        dat = os.path.join(a.out, "plots", f"{mpi}-{coll}.dat")
        with open(dat, "w") as d:
            for size, t in rows:
                fl = floor_bytes(coll, size, a.nodes, a.ppn) / rate * 1e6
                cells = [f"{t[v]:.1f}" if v in t else "-" for v in variants]
                r1 = f"{t['mpi'] / t['hier']:.2f}" if "mpi" in t and "hier" in t else "-"
                r2 = f" {t['han'] / t['hier']:.2f} |" if "han" in variants and "han" in t and "hier" in t else (" - |" if "han" in variants else "")
                lines.append(f"| {size} | " + " | ".join(cells) + f" | {fl:.1f} | {r1} |" + r2)
                d.write(f"{size} " + " ".join(f"{t.get(v, float('nan'))}" for v in variants) + f" {fl if fl > 0 else float('nan')}\n")
        lines.append("")
        png = os.path.join(a.out, "plots", f"{mpi}-{coll}.png")
        cols = " , ".join(f"'{dat}' using 1:{i + 2} with linespoints title '{v}'" for i, v in enumerate(variants))
        script = (f"set terminal pngcairo size 900,600; set output '{png}'; set logscale xy; "
                  f"set xlabel 'bytes'; set ylabel 'time per call (us)'; set key left top; "
                  f"set title '{mpi} {coll}, {a.nodes}x{a.ppn} ranks, {a.link}'; "
                  f"plot {cols}, '{dat}' using 1:{len(variants) + 2} with lines dashtype 2 title 'link floor'")
        try:
            subprocess.run(["gnuplot", "-e", script], check=True, capture_output=True)
            lines += [f"![{mpi} {coll}](plots/{mpi}-{coll}.png)", ""]
        except (OSError, subprocess.CalledProcessError):
            lines += ["(plot skipped: gnuplot not available)", ""]

    # Link bytes for the focus runs (bench-cluster.sh: one collective at 16 MiB, named by their
    # CSV): 1 warm-up call (the focus runs pass --warmup 1) plus the timed calls that the CSV's
    # iters column counts.
    focus = sorted(glob.glob(os.path.join(a.raw, "*.focus.links")))
    named = [p[:-6] + ".csv" for p in focus if os.path.exists(p[:-6] + ".csv")]
    if named:
        with open(named[0]) as f:
            first = next(iter(csv.DictReader(f)))
        coll, size = first["collective"], int(first["bytes"])
        fl = floor_bytes(coll, size, a.nodes, a.ppn)
        lines += [f"## Bytes over the links: {size / 2**20:g} MiB float32 {coll}", "",
                  f"Per call and per node (all calls of the run measured with `tc -s`, headers included, divided by "
                  f"1 warm-up + the timed calls); floor = {fl / 2**20:.1f} MiB per node.", "",
                  "| MPI | variant | max MiB sent by a node per call | × floor | median µs per call | floor µs | × floor time |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for path in focus:
            mpi, variant = os.path.basename(path).split(".")[:2]
            sent = read_links(path)
            t, calls = None, 6
            csvp = path[:-6] + ".csv"
            if os.path.exists(csvp):
                with open(csvp) as f:
                    row = next(iter(csv.DictReader(f)), {})
                    t = row.get("median_us")
                    calls = 1 + int(row.get("iters", 5))
            per_call = max(sent.values()) / calls
            tf = fl / rate * 1e6
            lines.append(f"| {mpi} | {variant} | {per_call / 2**20:.1f} | {per_call / fl:.2f} | "
                         f"{float(t):.0f} | {tf:.0f} | {float(t) / tf:.2f} |" if t else f"| {mpi} | {variant} | {per_call / 2**20:.1f} | {per_call / fl:.2f} | - | - | - |")
        lines.append("")
    # The practical floor: what the MPI alone moves across the links with every rank of a node
    # sending its share to its counterpart at once (bench/hier-bench/link_probe.cpp, no libhier).
    probes = sorted(glob.glob(os.path.join(a.raw, "*.probe.txt")))
    if probes:
        lines += ["## The practical floor: raw pair traffic across the links", "",
                  "`link-probe --bytes 16777216` (no libhier, no reduction): every rank sends its share of 16 MiB "
                  "per node to its counterpart on the other node with `MPI_Sendrecv`, all at once (or only the first "
                  "K ranks of each node, `--senders K`, while the others wait in `MPI_Barrier`). It is what this MPI "
                  "achieves here for the data movement alone, with no reduction and no intra-node step: "
                  "a practical floor for any schedule on this machine, next to the link-bound one.", ""]
        for path in probes:
            mpi = os.path.basename(path).split(".")[0]
            with open(path) as f:
                for l in f:
                    if l.startswith("link-probe:"):
                        lines.append(f"- {mpi}: {l.strip()[len('link-probe: '):]}")
        lines.append("")
    with open(os.path.join(a.out, "RESULTS-cluster.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {os.path.join(a.out, 'RESULTS-cluster.md')}")


if __name__ == "__main__":
    main()
