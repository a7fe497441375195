#!/bin/bash
# Quantized allreduce vs the MPI alone on three emulated shapes, alternating, 3 reps (Open MPI).
# usage: [HIER_BUILD=build/openmpi] bench/hier-bench/quant_shapes.sh   (needs root; results in /tmp/qbench)
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
b=${HIER_BUILD:-$PWD/build/openmpi}
. bench/lib/cluster.sh
bench_cluster_up qb 4 2
out=/tmp/qbench; bench_outdir $out
run() { # shape-args variant rep
  local nodes=$1 ppn=$2 v=$3 rep=$4 envs
  case $v in mpi) envs=(HIER_DISABLE=1);; int8) envs=(HIER_ALGO=hier HIER_QUANT=int8);; int4) envs=(HIER_ALGO=hier HIER_QUANT=int4);; exact) envs=(HIER_ALGO=hier);; esac
  local f=$out/$nodes.$ppn.$v.$rep.csv
  env "${envs[@]}" tools/minicluster --name qb run --timeout 120 --done-file $f --mpi openmpi --use-nodes $nodes --ppn $ppn --preload $b/libhier.so -- \
    $b/hier-bench --colls allreduce --min 16777216 --max 16777216 --iters 5 --warmup 1 --max-iters-bytes 16777216 --csv $f >/dev/null 2>&1
}
bench_cluster_warm openmpi $b
for rep in 1 2 3; do
  for shape in "2 2" "2 4" "4 2"; do
    for v in mpi int8 int4; do run $shape $v $rep; done
  done
done
bench_cluster_links
