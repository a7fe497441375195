#!/bin/bash
# HIER_PROGRESS=thread+mpi (exec/own_progress.hpp): a 16 MiB float32 MPI_Iallreduce that runs as
# the MPI's own call, advanced by libhier's progress thread, against the MPI alone, on the
# emulated cluster: bench_overlap's t_comm (start + MPI_Wait), t_total (start, a fixed amount of
# computation, wait) and overlap %, --iters 3. The variants alternate run by run, REPS runs each:
# mpi = HIER_DISABLE=1; own = libhier's defaults with HIER_PROGRESS=thread+mpi. Prints each run's
# line, then the links' counters (a run over a link that dropped packets is not kept). Needs root.
# usage: bench/nonblocking/own_progress_shapes.sh [MPI] [REPS] [SHAPES]   (defaults: openmpi 3 "2:2 2:4 4:2")
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
mpi=${1:-openmpi} reps=${2:-3} shapes=${3:-"2:2 2:4 4:2"}
b=$PWD/build/$mpi
. bench/lib/cluster.sh
bench_cluster_up ownp 4 4
bench_cluster_warm "$mpi" "$b"
out=/tmp/ownprogress.$mpi; bench_outdir $out
for rep in $(seq 1 "$reps"); do
  for shape in $shapes; do
    n=${shape%:*} p=${shape#*:}
    for v in mpi own; do
      envs=(HIER_PROGRESS=thread+mpi)
      [[ $v == mpi ]] && envs+=(HIER_DISABLE=1)
      f=$out/$n.$p.$v.$rep
      env "${envs[@]}" HIER_REPORT=$f.report.json tools/minicluster --name ownp run --timeout 300 --done-file $f.done \
        --mpi "$mpi" --use-nodes "$n" --ppn "$p" --preload "$b/libhier.so" -- \
        "$b/bench/nonblocking/bench_overlap" --iters 3 --work fixed --done $f.done > $f.txt 2>&1
      echo "$n x $p $v $rep: $(grep -o 't_comm_ms [0-9.]*\|t_total_ms [0-9.]*\|overlap_pct [0-9.]*' $f.txt | tr '\n' ' ')"
    done
  done
done
bench_cluster_links
