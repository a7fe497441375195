#!/usr/bin/env python3
"""Table of a tools/bench-pipeline.sh run: median time per (MPI, collective, size) for the MPI
alone and each HIER_CHUNK variant, and the ratios MPI alone / variant.

usage: pipeline_report.py RAW_DIR COMMAND_LINE "CHUNK ..."
"""
import csv, glob, os, statistics, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collectives  # noqa: E402  (tools/collectives.py: the rows of src/config/collectives.def)
ORDER = {k: i for i, k in enumerate(collectives.keys())}  # rows in the table's order
if len(sys.argv) != 4:
    print(__doc__.strip(), file=sys.stdout if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else sys.stderr)
    sys.exit(0 if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else 2)
raw, cmd, chunks = sys.argv[1], sys.argv[2], sys.argv[3].split()
data = {}  # (mpi, coll, bytes, variant) -> [median_us]
for path in glob.glob(os.path.join(raw, "*.csv")):
    mpi, variant = os.path.basename(path).split(".")[:2]
    for row in csv.DictReader(open(path)):
        if row["valid"] != "1":
            print(f"INVALID result: {path} {row}")
            continue
        if row["collective"] not in ORDER:
            sys.exit(f"pipeline_report.py: {path}: collective '{row['collective']}' is not in src/config/collectives.def")
        data.setdefault((mpi, row["collective"], int(row["bytes"]), variant), []).append(float(row["median_us"]))
print(f"\nCommand: `{cmd}`; load at the end: {open(os.path.join(raw, 'load.txt')).read().strip()}\n")
name = lambda c: c if c in ("default", "tuned") else f"chunk {c}"  # default: no HIER_* set; tuned: HIER_TUNE_FILE
print("| MPI | collective | bytes | MPI alone ms | " + " | ".join(f"{name(c)} ms" for c in chunks) + " | " +
      " | ".join(f"MPI/{name(c)}" for c in chunks) + " |")
print("|---|---|---:|---:|" + "---:|" * (2 * len(chunks)))
keys = sorted({k[:3] for k in data}, key=lambda k: (k[0], ORDER[k[1]], k[2]))
for mpi, coll, b in keys:
    med = lambda v: statistics.median(data[(mpi, coll, b, v)]) if (mpi, coll, b, v) in data else None
    base = med("mpi")
    times = [med(c) for c in chunks]
    fmt = lambda x: (f"{x / 1000:.3f}" if x < 10000 else f"{x / 1000:.1f}") if x else "-"
    ratio = lambda t: f"{base / t:.2f}" if base and t else "-"
    print(f"| {mpi} | {coll} | {b} | {fmt(base)} | " + " | ".join(fmt(t) for t in times) + " | " +
          " | ".join(ratio(t) for t in times) + " |")
n = {k[3] for k in data}
print(f"\n(medians over repetitions of each run's median; raw CSVs in {raw})")
