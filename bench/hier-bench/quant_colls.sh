#!/bin/bash
# Quantized MPI_Reduce_scatter_block and MPI_Allgather vs the MPI alone on three emulated shapes
# (2x2, 2x4, 4x2 ranks on one 4-node cluster, 1 Gbit/s), variants alternated, REPS repetitions.
# Reduce_scatter_block: 16 MiB float32 input per rank; allgather: a 16 MiB float32 result (the
# block per rank is 16 MiB / P). Prints one line per run (median of the run's iterations, and
# the bytes that crossed the links during it) and the drop counters; needs root.
# usage: [HIER_BUILD=build/<MPI>] MPI=openmpi REPS=2 bench/hier-bench/quant_colls.sh
# COLLS (default "reduce_scatter_block allgather"; allreduce: 16 MiB float32 per rank) and
# VARIANTS (default "mpi int8 int4"; int8/int4 force the hierarchical schedule with HIER_ALGO=hier,
# auto-int8/auto-int4 leave the choice, exact or quantized, to the planner; a suffix @SIZE, e.g.
# int8@2m, sets HIER_CHUNK=SIZE (pipelined in chunks of SIZE; without: HIER_CHUNK unset)) select the runs;
# SHAPES (default "2x2 2x4 4x2", nodes x ranks per node) the shapes.
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
mpi=${MPI:-openmpi} reps=${REPS:-2} name=${NAME:-quant}
b=$(realpath "${HIER_BUILD:-build/$mpi}")
colls=${COLLS:-reduce_scatter_block allgather} variants=${VARIANTS:-mpi int8 int4} shapes=${SHAPES:-2x2 2x4 4x2}
. bench/lib/cluster.sh
bench_cluster_up "$name" 4 2
out=/tmp/quant-colls.$name; bench_outdir "$out"
run() {  # nodes ppn coll variant rep
  local nodes=$1 ppn=$2 coll=$3 v=$4 rep=$5 envs size
  local q=${v%@*}
  case $q in mpi) envs=(HIER_DISABLE=1);; auto-*) envs=(HIER_QUANT=${q#auto-});; *) envs=(HIER_ALGO=hier HIER_QUANT=$q);; esac
  [[ $v == *@* ]] && envs+=(HIER_CHUNK=${v#*@})
  size=16777216
  [[ $coll == allgather ]] && size=$((16777216 / (nodes * ppn)))
  local f=$out/$nodes.$ppn.$coll.$v.$rep.csv b0 d0 b1 d1
  read -r b0 d0 < <(bench_cluster_sent)
  env "${envs[@]}" tools/minicluster --name "$name" run --timeout 180 --done-file "$f" --mpi "$mpi" --use-nodes "$nodes" --ppn "$ppn" \
    --preload "$b/libhier.so" -- "$b/hier-bench" --colls "$coll" --min $size --max $size --iters 5 --warmup 1 \
    --max-iters-bytes 16777216 --csv "$f" >/dev/null 2>&1
  read -r b1 d1 < <(bench_cluster_sent)
  local med
  med=$(awk -F, 'NR>1 {print $5}' "$f" 2>/dev/null | head -1)
  echo "$nodes x $ppn $coll $v rep $rep median_us=${med:-FAILED} link_bytes=$((b1 - b0)) drops=$((d1 - d0))"
}
bench_cluster_warm "$mpi" "$b"
for rep in $(seq 1 "$reps"); do
  for shape in $shapes; do
    for coll in $colls; do
      for v in $variants; do run "${shape%x*}" "${shape#*x}" "$coll" "$v" "$rep"; done
    done
  done
done
bench_cluster_links
