#!/usr/bin/env python3
"""hier-sim's output against the same predictions computed here, independently of src/model.

1. A hand-computable machine (2 nodes x 2 ranks, round numbers): allreduce of 4096 bytes; with
   measured level steps, on their shape and on another (4 nodes: not used).
2. The bundled Frontier-like machine: the flat ring allreduce of 1 GiB on 2 and 9408 nodes.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

sim, frontier = sys.argv[1], sys.argv[2]
failed = []


def check(name, got, want, rel=1e-9):
    if abs(got - want) > rel * max(abs(want), 1.0):
        failed.append(f"{name}: hier-sim {got}, expected {want}")


def run(machine_path, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.csv")
        subprocess.run([sim, "--machine", machine_path, "--csv", out] + args, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return list(csv.DictReader(f))


# 1. Inside a node 1 us + 1 ns/B; across 10 us + 10 ns/B one flow, 20 ns/B each of two;
# reduction 0.5 ns/B; no overheads; the MPI's allreduce is the ring.
simple = {
    "name": "hand", "levels": [{"name": "node", "size": 2}], "nodes": [2],
    "model": {
        "format": "libhier-tune/2",
        "machine": {"mpi_family": "mpich", "nodes": 2, "ranks_per_node": 2},
        "levels": {"intra": {"latency_ns": 1000, "ns_per_byte": 1.0},
                   "inter": {"latency_ns": 10000, "ns_per_byte": 10.0,
                             "concurrent": [{"flows": 1, "ns_per_byte": 10.0}, {"flows": 2, "ns_per_byte": 20.0}]}},
        "compute": {"reduce_ns_per_byte": 0.5, "copy_ns_per_byte": 0.0},
        "flat_algorithms": {"allreduce": [{"algorithm": "ring"}]},
        "planner": {"margin": 0.0, "step_overhead_ns": 0},
        "pipeline": {"overlap": 1.0, "chunk_bytes": {"allreduce": [], "bcast": []}},
    },
}
n, red = 4096, 0.5
piece = n / 4
# Ring over 4 ranks: each of 6 rounds has one message inside and one crossing (one flow).
ring = 6 * max(1000 + piece * 1.0, 10000 + piece * 10.0) + 3 * piece * red
# Recursive doubling: distance 1 inside (2 flows, 1 ns/B), distance 2 both ranks cross (20 ns/B).
rd = (1000 + n * 1.0 + n * red) + (10000 + n * 20.0 + n * red)
# Binomial reduce then bcast: the root's message crosses alone, then one inside.
tree = (10000 + n * 10.0 + n * red) + (1000 + n + n * red) + (10000 + n * 10.0) + (1000 + n)
# libhier rs-ar-ag: reduce-scatter in the node, allreduce across (both positions: 20 ns/B),
# allgather in the node.
hier = (1000 + n / 2 + n / 2 * red) + (2 * (10000 + n / 4 * 20.0) + n / 4 * red) + (1000 + n / 2)
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump(simple, f)
    simple_path = f.name
try:
    row = run(simple_path, ["--coll", "allreduce", "--bytes", str(n), "--elem", "4"])[0]
finally:
    os.unlink(simple_path)
check("hand ring", float(row["flat_ring_ns"]), ring)
check("hand recursive doubling", float(row["flat_recursive_doubling_ns"]), rd)
check("hand tree", float(row["flat_tree_ns"]), tree)
check("hand MPI (ring)", float(row["flat_mpi_ns"]), ring)
check("hand libhier", float(row["libhier_ns"]), hier)
if row["libhier_algorithm"] != "rs-ar-ag" or row["planner"] != "hier":
    failed.append(f"hand: algorithm {row['libhier_algorithm']}, planner {row['planner']}")

# 1b. The same machine with measured level steps across nodes (levels.inter.steps, 2 members):
# on its own shape (2 nodes) libhier's cross allreduce of n/2 bytes is the measured time,
# interpolated (1024 B: 5000, 4096 B: 11000; at 2048 B: 7000); on 4 nodes the cross
# communicators have 4 members, not the measured 2: the rounds model (ring, 6 rounds of n/8).
stepped = json.loads(json.dumps(simple))
stepped["model"]["levels"]["inter"]["steps"] = {
    "members": 2, "allreduce": [{"bytes": 1024, "ns": 5000}, {"bytes": 4096, "ns": 11000}]}
node_rs, node_ag = 1000 + n / 2 + n / 2 * red, 1000 + n / 2
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump(stepped, f)
    stepped_path = f.name
try:
    rows = {int(r["nodes"]): r for r in run(stepped_path, ["--coll", "allreduce", "--bytes", str(n), "--elem", "4",
                                                           "--nodes", "2,4", "--algo", "rs-ar-ag"])}
finally:
    os.unlink(stepped_path)
check("measured steps, own shape", float(rows[2]["libhier_ns"]), node_rs + 7000 + node_ag)
q = n / 2 / 4
check("measured steps, 4 nodes", float(rows[4]["libhier_ns"]),
      node_rs + 6 * (10000 + q * 20.0) + 3 * q * red + node_ag)

# 2. Frontier-like: flat ring of 1 GiB; 8 ranks per node, so each ring round has 7 messages
# inside a node and 1 crossing to the next.
m = json.load(open(frontier))["model"]
intra, inter = m["levels"]["intra"], m["levels"]["inter"]


def per_flow(level, flows):
    pts = [(1, level["ns_per_byte"])] + [(p["flows"], p["ns_per_byte"]) for p in level.get("concurrent", [])]
    for (f0, v0), (f1, v1) in zip(pts, pts[1:]):
        if f0 <= flows <= f1 and f1 > f0:
            return v0 + (flows - f0) / (f1 - f0) * (v1 - v0)
    return pts[-1][1] * flows / pts[-1][0]


rows = run(frontier, ["--coll", "allreduce", "--bytes", "1g", "--nodes", "2,9408"])
for row in rows:
    p = int(row["ranks"])
    b = 2**30 / p
    rnd = max(intra["latency_ns"] + b * per_flow(intra, 7), inter["latency_ns"] + b * per_flow(inter, 1))
    want = (p - 1) * (2 * rnd + b * m["compute"]["reduce_ns_per_byte"])
    check(f"frontier ring at {row['nodes']} nodes", float(row["flat_ring_ns"]), want, rel=1e-6)
    if float(row["libhier_ns"]) >= float(row["flat_ring_ns"]):
        failed.append(f"frontier {row['nodes']} nodes: libhier {row['libhier_ns']} not below the ring")

if failed:
    print("\n".join(failed))
    sys.exit(1)
print("hier-sim: all predictions match")
