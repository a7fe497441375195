#!/bin/bash
# Quantized allreduce vs the MPI alone on three emulated shapes, alternating, 3 reps (Open MPI).
cd "$(dirname "$0")/../.."
b=${HIER_BUILD:-$PWD/build/openmpi}
tools/minicluster --name qb down >/dev/null 2>&1
tools/minicluster --name qb up --nodes 4 --ppn 2 --link 1gbit >/dev/null || exit 1
trap 'tools/minicluster --name qb down >/dev/null 2>&1' EXIT
out=/tmp/qbench; rm -rf $out; mkdir -p $out
run() { # shape-args variant rep
  local nodes=$1 ppn=$2 v=$3 rep=$4 envs
  case $v in mpi) envs=(HIER_DISABLE=1);; int8) envs=(HIER_ALGO=hier HIER_QUANT=int8);; int4) envs=(HIER_ALGO=hier HIER_QUANT=int4);; exact) envs=(HIER_ALGO=hier);; esac
  local f=$out/$nodes.$ppn.$v.$rep.csv
  env "${envs[@]}" tools/minicluster --name qb run --timeout 120 --done-file $f --mpi openmpi --use-nodes $nodes --ppn $ppn --preload $b/libhier.so -- \
    $b/hier-bench --colls allreduce --min 16777216 --max 16777216 --iters 5 --warmup 1 --max-iters-bytes 16777216 --csv $f >/dev/null 2>&1
}
tools/minicluster --name qb run --mpi openmpi --use-nodes 2 --ppn 2 -- $b/hier-bench --colls allreduce --min 1048576 --max 1048576 --iters 2 >/dev/null 2>&1
for rep in 1 2 3; do
  for shape in "2 2" "2 4" "4 2"; do
    for v in mpi int8 int4; do run $shape $v $rep; done
  done
done
tools/minicluster --name qb links 2>&1 | tail -6
