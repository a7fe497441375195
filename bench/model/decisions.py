#!/usr/bin/python3
"""The default planner's decisions of a model file, 64 KiB .. 16 MiB, by hier-sim (docs/model.md's tables).

    decisions.py --sim build/openmpi/hier-sim --model src/model/builtin-openmpi.json [--shapes 2x2 2x4 4x2]

H = hierarchical, Hn = pipelined in n chunks, F = flat; bytes as the planner counts them
(allgather: the whole output; reductions of float32).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import collectives  # noqa: E402  (tools/collectives.py: the rows of src/config/collectives.def)

# Every collective of the table, in its order; the ones without buffers are planned at 0 bytes.
ROWS = collectives.rows()
COLLS = [r["key"] for r in ROWS]
NO_DATA = {r["key"] for r in ROWS if r["Buffers"] == "no_buffers"}

ap = argparse.ArgumentParser()
ap.add_argument("--sim", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--shapes", nargs="+", default=["2x2", "2x4", "4x2"])
ap.add_argument("--colls", nargs="+", default=COLLS, choices=COLLS)
a = ap.parse_args()
model = json.load(open(a.model))
sizes = [64 << 10 << i for i in range(9)]
lab = lambda b: f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"
for shape in a.shapes:
    nodes, ppn = map(int, shape.split("x"))
    print(f"\n{model['machine']['mpi_family']}, {nodes} nodes x {ppn} ranks:\n")
    print("| collective | " + " | ".join(lab(b) for b in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    with tempfile.TemporaryDirectory() as d:
        mp, cp = os.path.join(d, "m.json"), os.path.join(d, "o.csv")
        json.dump({"name": "x", "levels": [{"name": "node", "size": ppn}], "nodes": [nodes], "model": model}, open(mp, "w"))
        for c in a.colls:
            row = []
            for b in sizes:
                subprocess.run([a.sim, "--machine", mp, "--coll", c, "--bytes", str(0 if c in NO_DATA else b), "--csv", cp],
                               check=True, stdout=subprocess.DEVNULL)
                r = next(csv.DictReader(open(cp)))
                if r["planner"] == "flat":
                    row.append("F")
                else:
                    # the auto plan's chunks: hier-sim's CSV gives the forced plan's; equal where auto is hier
                    row.append("H" if int(r["chunks"]) <= 1 else f"H{r['chunks']}")
            print(f"| {c} | " + " | ".join(row) + " |")
