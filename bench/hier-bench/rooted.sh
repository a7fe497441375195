#!/bin/bash
# MPI_Gather / MPI_Scatter (rooted at rank 0) on the emulated cluster, 2 nodes x 4 ranks on a
# 1 Gbit/s link: the MPI alone (HIER_DISABLE=1), libhier's schedule forced (HIER_ALGO=hier) and
# the planner's choice (HIER_ALGO unset), alternated, REPS repetitions; prints the median of the
# per-run medians (ms) per size (bytes per rank's block) and the algorithm the planner chose
# (HIER_REPORT). Needs root.
# usage: bench/hier-bench/rooted.sh [MPI] [REPS] [SIZES]   (defaults: openmpi 3 "1048576 16777216")
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
mpi=${1:-openmpi} reps=${2:-3} sizes=${3:-"1048576 16777216"}
b=$PWD/build/$mpi
name=rootedb
. bench/lib/cluster.sh
bench_cluster_up $name 2 4
out=/tmp/rootedbench.$mpi; bench_outdir $out
run() { # variant rep size
  local v=$1 rep=$2 size=$3 envs
  case $v in
    mpi) envs=(HIER_DISABLE=1);;
    hier) envs=(HIER_ALGO=hier);;
    auto) envs=(HIER_REPORT=$out/report.$size.%r.json);;
  esac
  local f=$out/$v.$size.$rep.csv
  env "${envs[@]}" tools/minicluster --name $name run --timeout 300 --done-file $f --mpi $mpi \
    --preload $b/libhier.so -- $b/hier-bench --colls gather,scatter --min $size --max $size --iters 5 \
    --warmup 1 --max-iters-bytes $size --csv $f >/dev/null 2>&1
}
for size in $sizes; do
  for rep in $(seq $reps); do
    for v in mpi hier auto; do run $v $rep $size; done
  done
done
python3 - "$out" "$reps" "$sizes" <<'PY'
import csv, glob, json, statistics, sys
out, reps, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
print("| collective | bytes per rank | MPI alone (ms) | libhier hier (ms) | planner (ms) | planner chose |")
print("|---|---|---|---|---|---|")
for coll in ("gather", "scatter"):
    for size in sizes:
        med = {}
        for v in ("mpi", "hier", "auto"):
            vals = []
            for f in glob.glob(f"{out}/{v}.{size}.*.csv"):
                vals += [float(r["median_us"]) / 1e3 for r in csv.DictReader(open(f)) if r["collective"] == coll and r["valid"] == "1"]
            med[v] = f"{statistics.median(vals):.1f}" if vals else "-"
        try:
            algos = json.load(open(f"{out}/report.{size}.0.json"))["functions"]["MPI_" + coll.capitalize()]["algorithms"]
            chose = ", ".join(sorted(algos))
        except Exception:
            chose = "?"
        print(f"| {coll} | {size} | {med['mpi']} | {med['hier']} | {med['auto']} | {chose} |")
PY
bench_cluster_links
