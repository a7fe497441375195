#!/usr/bin/python3
"""Predicted time against node count from hier-sim's CSV (needs Debian's python3-matplotlib).

    hier-sim --machine tools/hier-sim/frontier.json --coll allreduce --bytes 1g --csv sim.csv
    /usr/bin/python3 tools/hier-sim/plot.py sim.csv sim.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
nodes = [int(r["nodes"]) for r in rows]
series = [("libhier_ns", "libhier (planner's schedule)"), ("flat_mpi_ns", "flat: the MPI's pick"),
          ("flat_ring_ns", "flat ring"), ("flat_recursive_doubling_ns", "flat recursive doubling"),
          ("flat_tree_ns", "flat binomial tree")]
fig, ax = plt.subplots(figsize=(7, 4.5))
for key, label in series:
    ax.plot(nodes, [float(r[key]) / 1e6 for r in rows], marker="o", markersize=3, label=label)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("nodes")
ax.set_ylabel("predicted time (ms)")
ax.set_title(f"{rows[0]['collective']} of {int(rows[0]['bytes']) / 2**20:g} MiB, {int(rows[0]['ranks']) // nodes[0]} ranks per node")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
