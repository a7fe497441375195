#!/bin/bash
# HIER_SHM (docs/shm.md): 16 MiB float32 MPI_Allreduce on the emulated cluster, exact and int8,
# node steps as messages (HIER_SHM=off) vs through shared memory (HIER_SHM=on), against the MPI
# alone (HIER_DISABLE=1); shapes 2 x 4 and 4 x 2 (and 2 x 2), the variants alternated, REPS
# repetitions; prints the median of the per-run medians (ms) and the packets dropped. Needs root.
# usage: bench/hier-bench/shm_shapes.sh [MPI] [REPS] [SHAPES]   (defaults: openmpi 3 "2:4 4:2")
# VARIANTS="..." picks variants: mpi exact exact_shm int8 int8_shm (the default set), int4 int4_shm
# (HIER_QUANT=int4), int8_auto int4_auto (quantized, HIER_SHM=auto), int8_shm_c2m int4_c1m ...
# (quantized, HIER_CHUNK=2m / 1m, node steps through the segment / as messages; c0: unchunked), default
# (no HIER_* set: the planner's choice, HIER_SHM=off), default_auto (the same with HIER_SHM=auto)
# and probe (link-probe, the floor).
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
mpi=${1:-openmpi} reps=${2:-3} shapes=${3:-"2:4 4:2"}
b=$PWD/build/$mpi
name=shmb
. bench/lib/cluster.sh
bench_cluster_up $name 4 2
out=/tmp/shmbench.$mpi; bench_outdir $out
variants=${VARIANTS:-"mpi exact exact_shm int8 int8_shm"}
run() { # nodes ppn variant rep
  local nodes=$1 ppn=$2 v=$3 rep=$4 envs
  case $v in
    mpi) envs=(HIER_DISABLE=1);;
    exact) envs=(HIER_ALGO=hier HIER_SHM=off);;
    exact_shm) envs=(HIER_ALGO=hier HIER_SHM=on);;
    int8) envs=(HIER_ALGO=hier HIER_QUANT=int8 HIER_SHM=off);;
    int8_shm) envs=(HIER_ALGO=hier HIER_QUANT=int8 HIER_SHM=on);;
    int4) envs=(HIER_ALGO=hier HIER_QUANT=int4 HIER_SHM=off);;
    int4_shm) envs=(HIER_ALGO=hier HIER_QUANT=int4 HIER_SHM=on);;
    int8_auto) envs=(HIER_ALGO=hier HIER_QUANT=int8 HIER_SHM=auto);;
    int4_auto) envs=(HIER_ALGO=hier HIER_QUANT=int4 HIER_SHM=auto);;
    int8_shm_c*|int4_shm_c*)             # pipelined: int8_shm_c2m = HIER_CHUNK=2m (c0: unchunked)
      envs=(HIER_ALGO=hier HIER_QUANT=${v%%_*} HIER_SHM=on HIER_CHUNK=${v#*_shm_c});;
    int8_c*|int4_c*) envs=(HIER_ALGO=hier HIER_QUANT=${v%%_*} HIER_SHM=off HIER_CHUNK=${v#*_c});;
    default) envs=(HIER_SHM=off);;      # what a user gets today: the planner's choice, message steps
    default_auto) envs=(HIER_SHM=auto);;  # the planner's choice, with auto as the default would be
    probe) envs=();;                     # link-probe: the floor (pair traffic, no reduction, no libhier)
  esac
  if [ $v = probe ]; then
    tools/minicluster --name $name run --timeout 120 --mpi $mpi --use-nodes $nodes --ppn $ppn -- $b/link-probe \
      --iters 5 > $out/$nodes.$ppn.$v.$rep.txt 2>&1
    return
  fi
  local f=$out/$nodes.$ppn.$v.$rep.csv
  env "${envs[@]}" tools/minicluster --name $name run --timeout 120 --done-file $f --mpi $mpi --use-nodes $nodes \
    --ppn $ppn --preload $b/libhier.so -- $b/hier-bench --colls allreduce --min 16777216 --max 16777216 --iters 5 \
    --warmup 1 --max-iters-bytes 16777216 --csv $f >/dev/null 2>&1
}
bench_cluster_warm $mpi $b
for rep in $(seq 1 "$reps"); do
  for shape in $shapes; do
    for v in $variants; do run ${shape%:*} ${shape#*:} $v $rep; done
  done
done
python3 - "$out" "$shapes" "$variants" <<'PY'
import csv, glob, re, statistics, sys
out, shapes, variants = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def ms(path):
    if path.endswith(".txt"):  # link-probe's line: "... median X ms, ..."
        m = re.search(r"median ([0-9.]+) ms", open(path).read())
        return float(m.group(1)) if m else float("nan")
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r.get("collective") == "allreduce"]
    key = "median_us"
    return float(rows[0][key]) / 1e3
print("| nodes x ranks | " + " | ".join(variants) + " |")
print("|---|" + "---:|" * len(variants))
for s in shapes:
    n, p = s.split(":")
    cells, base = [], None
    for v in variants:
        runs = sorted(ms(f) for f in glob.glob(f"{out}/{n}.{p}.{v}.*.csv") + glob.glob(f"{out}/{n}.{p}.{v}.*.txt"))
        if not runs:
            cells.append("-"); continue
        m = statistics.median(runs)
        base = m if v == "mpi" else base
        ratio = f" ({base / m:.2f}x)" if base and v != "mpi" else ""
        cells.append(f"{m:.0f} ms [{' '.join(f'{x:.0f}' for x in runs)}]{ratio}")
    print(f"| {n} x {p} | " + " | ".join(cells) + " |")
PY
bench_cluster_links
