#!/bin/bash
# Chunk-size sweep of libhier's pipelined hierarchical collectives (HIER_CHUNK) on the emulated
# cluster: the MPI alone (HIER_DISABLE=1) against HIER_ALGO=hier at each chunk size (0 = not
# pipelined), variants alternating within each repetition, medians over repetitions. Prints a
# markdown table (median ms and MPI-alone / variant) and keeps the raw CSVs. Needs root.
#
# usage: tools/bench-pipeline.sh [--mpis "openmpi mpich"] [--chunks "0 4m 2m 1m"] [--colls allreduce,bcast]
#                                [--min 1048576] [--max 33554432] [--iters 8] [--reps 2]
#                                [--nodes 2] [--ppn 4] [--link 1gbit] [--timeout 300]
#                                [--max-iters-bytes 4194304]   (larger messages run fewer iterations, at least 3)
#                                [--tune-file F]   (with the variant "tuned" in --chunks)
# A chunk value of "default" runs libhier with no HIER_* setting (HIER_ALGO=auto: the planner's
# own choice, flat outside its windows): --chunks default measures what users get against flat.
# A chunk value of "tuned" runs libhier like "default" but with HIER_TUNE_FILE=F (--tune-file):
# the planner deciding from a model that hier-tune measured, e.g. --chunks "default tuned".
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/lib/help.sh
hier_help "$@"
root=$PWD
command_line="tools/bench-pipeline.sh $*"
mpis="openmpi mpich" chunks="0 4m 2m 1m" colls=allreduce,bcast min=$((1 << 20)) max=$((32 << 20))
iters=8 reps=2 nodes=2 ppn=4 link=1gbit timeout=300 max_iters_bytes=$((4 << 20)) tune_file=
while (($#)); do
  case $1 in
    --mpis) mpis=$2; shift 2;; --chunks) chunks=$2; shift 2;; --colls) colls=$2; shift 2;;
    --min) min=$2; shift 2;; --max) max=$2; shift 2;; --iters) iters=$2; shift 2;; --reps) reps=$2; shift 2;;
    --nodes) nodes=$2; shift 2;; --ppn) ppn=$2; shift 2;; --link) link=$2; shift 2;; --timeout) timeout=$2; shift 2;;
    --max-iters-bytes) max_iters_bytes=$2; shift 2;;
    --tune-file) tune_file=$(realpath "$2"); shift 2;;
    *) echo "bench-pipeline.sh: unknown option $1 (see the header of this script)" >&2; exit 2;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "bench-pipeline.sh: needs root (network namespaces)" >&2; exit 2; }
if [[ " $chunks " == *" tuned "* ]]; then
  [[ -n $tune_file && -r $tune_file ]] || { echo "bench-pipeline.sh: the variant \"tuned\" needs --tune-file FILE (a readable hier-tune file)" >&2; exit 2; }
fi
for mpi in $mpis; do
  [[ -x build/$mpi/hier-bench && -f build/$mpi/libhier.so ]] || { cmake --preset "$mpi" >/dev/null && cmake --build --preset "$mpi" >/dev/null; }
done
raw=$(mktemp -d /tmp/bench-pipeline.XXXXXX)
cleanup() { tools/minicluster down >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
tools/minicluster down >/dev/null 2>&1 || true
tools/minicluster up --nodes "$nodes" --ppn "$ppn" --link "$link"

# Large sizes run fewer iterations (at least 3): hier-bench --max-iters-bytes.
bench_args=(--colls "$colls" --min "$min" --max "$max" --iters "$iters" --warmup 1 --max-iters-bytes "$max_iters_bytes")
for mpi in $mpis; do
  echo "== $mpi: warm-up"
  tools/minicluster run --timeout "$timeout" --mpi "$mpi" --preload "$root/build/$mpi/libhier.so" -- \
    "$root/build/$mpi/hier-bench" --colls allreduce --min 1048576 --max 1048576 --iters 2 >/dev/null 2>&1 || true
  for rep in $(seq 1 "$reps"); do
    for v in mpi $chunks; do
      if [[ $v == mpi ]]; then envs=(HIER_DISABLE=1)
      elif [[ $v == default ]]; then envs=()  # libhier as users run it: the planner decides
      elif [[ $v == tuned ]]; then envs=("HIER_TUNE_FILE=$tune_file")  # the planner, on a measured model
      else envs=(HIER_ALGO=hier "HIER_CHUNK=$v"); fi
      echo "== $mpi: $v (rep $rep/$reps)"
      # A run that hangs at finalize (MPICH/UCX) is ended 10 s after its CSV is written.
      env "${envs[@]}" tools/minicluster run --timeout "$timeout" --done-file "$raw/$mpi.$v.$rep.csv" --mpi "$mpi" \
        --preload "$root/build/$mpi/libhier.so" -- \
        "$root/build/$mpi/hier-bench" "${bench_args[@]}" --label "$v" --csv "$raw/$mpi.$v.$rep.csv" \
        > "$raw/$mpi.$v.$rep.log" 2>&1 || echo "   (run ended with an error or timeout; see $raw/$mpi.$v.$rep.log)"
    done
  done
done
uptime > "$raw/load.txt"
/usr/bin/python3 tools/pipeline_report.py "$raw" "$command_line" "$chunks"
