#!/usr/bin/python3
"""Tables of bench/model/validate.sh: measured against predicted, default planner against the MPI.

    validate_report.py --raw DIR [--command TEXT]

Per MPI and shape (files DIR/MPI-NxP.VARIANT.REP.csv from hier-bench, DIR/MPI-NxP.sim.csv from
hier-sim): the median over repetitions of each cell's median time; the prediction error is
predicted / measured - 1. "hier" is libhier's schedule forced (HIER_ALGO=hier), "MPI" the MPI
alone, "auto" the default planner; both libhier variants ran with the tune file hier-tune measured
on the same cluster just before.
"""
import argparse
import csv
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import collectives  # noqa: E402  (tools/collectives.py: the rows of src/config/collectives.def)

ORDER = {k: i for i, k in enumerate(collectives.keys())}  # tables in the table's order

ap = argparse.ArgumentParser()
ap.add_argument("--raw", required=True)
ap.add_argument("--command", default="")
a = ap.parse_args()

measured = {}  # (tag, variant, coll, bytes) -> [median_us per rep]
for path in glob.glob(os.path.join(a.raw, "*.csv")):
    m = re.match(r"(.+)\.(mpi|hier|auto)\.(\d+)\.csv$", os.path.basename(path))
    if not m:
        continue
    for r in csv.DictReader(open(path)):
        if r["valid"] != "1":
            continue
        measured.setdefault((m[1], m[2], r["collective"], int(r["bytes"])), []).append(float(r["median_us"]))

drops = {}
if os.path.exists(os.path.join(a.raw, "drops.txt")):
    for line in open(os.path.join(a.raw, "drops.txt")):
        f = line.split()
        drops[f[0]] = drops.get(f[0], 0) + int(f[-1])

def med(key):
    v = measured.get(key)
    return statistics.median(v) / 1e3 if v else None

def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"

print(f"Command: `{a.command}`\n")
if os.path.exists(os.path.join(a.raw, "load.txt")):
    print(f"Load after the runs: `{open(os.path.join(a.raw, 'load.txt')).read().strip()}`\n")
summary = []
for simpath in sorted(glob.glob(os.path.join(a.raw, "*.sim.csv"))):
    tag = os.path.basename(simpath)[: -len(".sim.csv")]
    cols = ["bench_bytes", "nodes", "ranks", "collective", "bytes", "libhier_ns", "libhier_algorithm", "chunks",
            "flat_mpi_ns", "flat_ring_ns", "flat_recursive_doubling_ns", "flat_tree_ns", "planner"]
    rows = [dict(zip(cols, r)) for r in csv.reader(open(simpath))]
    for r in rows:
        if r["collective"] not in ORDER:
            sys.exit(f"validate_report.py: {simpath}: collective '{r['collective']}' is not in src/config/collectives.def")
    rows.sort(key=lambda r: (ORDER[r["collective"]], int(r["bench_bytes"])))
    print(f"### {tag} (packets dropped on the links over all runs: {drops.get(tag, 'n/a')})\n")
    print("| collective | size | MPI ms | predicted | err | hier ms | predicted | err | algorithm | auto ms | planner | MPI / auto |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|")
    err_h, err_f, slower, wins, noise = [], [], [], [], []
    # The decision judged by the two forced variants (libhier's schedule, the MPI alone) instead
    # of the auto run: free of the auto run's own run-to-run noise.
    lost, missed = [], []
    for r in rows:
        coll, b = r["collective"], int(r["bench_bytes"])
        mm, mh, ma = (med((tag, v, coll, b)) for v in ("mpi", "hier", "auto"))
        ph, pf = float(r["libhier_ns"]) / 1e6, float(r["flat_mpi_ns"]) / 1e6
        eh = ph / mh - 1 if mh else None
        ef = pf / mm - 1 if mm else None
        if eh is not None:
            err_h.append(eh)
        if ef is not None:
            err_f.append(ef)
        ratio = mm / ma if mm and ma else None
        if ratio is not None:
            # Where the planner chose flat, libhier passes the call to the MPI: MPI / auto is the
            # run-to-run noise of the same algorithm, not a choice libhier made.
            bucket = slower if ratio < 1 / 1.05 else wins if ratio > 1.05 else []
            if bucket is slower and r["planner"] == "flat":
                bucket = noise
            bucket.append((coll, b, ratio))
        if mm and mh:
            if r["planner"] == "hier" and mm / mh < 1 / 1.05:
                lost.append((coll, b, mm / mh))
            if r["planner"] == "flat" and mm / mh > 1.05:
                missed.append((coll, b, mm / mh))
        fmt = lambda x: f"{x:.2f}" if x is not None else "-"
        pct = lambda x: f"{x:+.0%}" if x is not None else "-"
        print(f"| {coll} | {size(b)} | {fmt(mm)} | {pf:.2f} | {pct(ef)} | {fmt(mh)} | {ph:.2f} | {pct(eh)} | "
              f"{r['libhier_algorithm']}/{r['chunks']} | {fmt(ma)} | {r['planner']} | {fmt(ratio)} |")
    def stats(e):
        if not e:
            return "-"
        ab = [abs(x) for x in e]
        return f"median |err| {statistics.median(ab):.0%}, max {max(ab):.0%}, over 40%: {sum(x > 0.4 for x in ab)} of {len(ab)}"
    print()
    print(f"- hier schedule predictions: {stats(err_h)}")
    print(f"- flat (MPI) predictions: {stats(err_f)}")
    print(f"- default planner vs the MPI alone: {len(wins)} cells faster by >5%, {len(slower)} cells slower by >5% "
          f"where it went hierarchical" + ("".join(f"; {c} {size(b)}: {r:.2f}" for c, b, r in slower)))
    if noise:
        print(f"- cells planned flat (passed through) that still measured >5% slower (run-to-run noise of the "
              f"MPI's own algorithm): " + "; ".join(f"{c} {size(b)}: {r:.2f}" for c, b, r in noise))
    cells = lambda xs: "; ".join(f"{c} {size(b)}: {r:.2f}" for c, b, r in xs) or "none"
    print(f"- the decision against the forced runs (MPI / hier ms): hierarchical where libhier's schedule "
          f"measured >5% slower: {cells(lost)}; flat where it measured >5% faster: {cells(missed)}")
    print()
    summary.append((tag, err_h, err_f, slower))
