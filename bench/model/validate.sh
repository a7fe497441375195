#!/bin/bash
# Model validation on the emulated cluster (issue 11): does the planner's cost model predict what
# the collectives really take? Per MPI and shape:
#   1. hier-tune measures the machine model on the cluster, with libhier preloaded as hier-run
#      launches it (so libhier's own schedules too, hier_measured): the file the user would feed
#      to HIER_TUNE_FILE;
#   2. hier-bench times, alternating runs, the MPI alone (HIER_DISABLE=1), libhier's
#      hierarchical schedule (HIER_ALGO=hier) and the default planner (nothing forced), both with
#      that tune file, for allreduce, allgather, reduce_scatter_block and bcast;
#   3. hier-sim predicts each cell from the same file with the same shape (the planner's own
#      builders and cost code);
#   4. validate_report.py prints measured against predicted (error = predicted/measured - 1) and
#      the default planner against the MPI alone, with the packets dropped on the links.
# Needs root (network namespaces) and the builds of both MPIs (--build-dir PREFIX: PREFIX-openmpi,
# PREFIX-mpich; default build/lead).
# usage: bench/model/validate.sh [--mpis "openmpi mpich"] [--shapes "2x4 4x2"] [--reps 3]
#                                [--min 65536] [--max 16777216] [--step 2] [--iters 6] [--out DIR] [--build-dir PREFIX]
#                                [--tune-dir DIR]   (reuse tune files DIR/tune-MPI-NxP.json instead of measuring)
#                                [--tune-args "ARGS"]   (more hier-tune arguments, e.g. --level-steps, or
#                                                        --no-hier: no hier_measured, the IR alone)
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
command_line="bench/model/validate.sh $*"
mpis="openmpi mpich" shapes="2x4 4x2" reps=3 min=65536 max=$((16 << 20)) iters=6 out=bench/model/out
prefix=build/lead tune_dir="" timeout=600 step=2 tune_args=
while (($#)); do
  case $1 in
    --mpis) mpis=$2; shift 2;; --shapes) shapes=$2; shift 2;; --reps) reps=$2; shift 2;;
    --min) min=$2; shift 2;; --max) max=$2; shift 2;; --iters) iters=$2; shift 2;; --step) step=$2; shift 2;;
    --out) out=$2; shift 2;; --build-dir) prefix=$2; shift 2;; --tune-dir) tune_dir=$2; shift 2;;
    --tune-args) tune_args=$2; shift 2;;
    *) echo "validate.sh: unknown option $1 (see the header of this script)" >&2; exit 2;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "validate.sh: needs root (network namespaces)" >&2; exit 2; }
export MINICLUSTER_NAME=${MINICLUSTER_NAME:-validate}
mkdir -p "$out"
out=$(cd "$out" && pwd)
raw=$out/raw
mkdir -p "$raw"
cleanup() { tools/minicluster down >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
colls=allreduce,allgather,reduce_scatter_block,bcast

drops_between() { /usr/bin/python3 -c 'import json,sys; a,b=[json.loads(x) for x in sys.argv[1:]]; print(b["total_dropped"]-a["total_dropped"])' "$1" "$2"; }

for shape in $shapes; do
  nodes=${shape%x*} ppn=${shape#*x}
  tools/minicluster down >/dev/null 2>&1 || true
  tools/minicluster up --nodes "$nodes" --ppn "$ppn" --link 1gbit >/dev/null
  for mpi in $mpis; do
    b=$root/$prefix-$mpi
    [[ -x $b/hier-bench && -x $b/hier-tune && -x $b/hier-sim && -f $b/libhier.so ]] || { echo "validate.sh: build $b first" >&2; exit 2; }
    tag=$mpi-${nodes}x$ppn
    echo "== $tag: warm-up"
    tools/minicluster run --timeout 300 --mpi "$mpi" -- "$b/hier-bench" --colls allreduce --min 1024 --max 1048576 --iters 2 >/dev/null 2>&1 || true
    tune=$out/tune-$tag.json
    if [[ -n $tune_dir ]]; then
      cp "$tune_dir/tune-$tag.json" "$tune"
    else
      echo "== $tag: hier-tune"
      start=$(date +%s)
      # libhier preloaded, as a user launches it (hier-run): hier-tune then times libhier's own
      # schedules too (hier_measured; --tune-args --no-hier: the IR's predictions alone)
      tools/minicluster run --timeout 300 --done-file "$tune" --mpi "$mpi" --preload "$b/libhier.so" -- "$b/hier-tune" $tune_args -o "$tune" > "$raw/$tag.tune.log" 2>&1 \
        || { echo "hier-tune failed on $tag:"; tail -5 "$raw/$tag.tune.log"; exit 1; }
      echo "   hier-tune took $(( $(date +%s) - start )) s"
    fi
    for rep in $(seq 1 "$reps"); do
      for v in mpi hier auto; do
        case $v in
          mpi) envs=(HIER_DISABLE=1);;
          hier) envs=(HIER_ALGO=hier "HIER_TUNE_FILE=$tune");;
          auto) envs=("HIER_TUNE_FILE=$tune");;
        esac
        csv=$raw/$tag.$v.$rep.csv
        before=$(tools/minicluster links --json)
        env "${envs[@]}" tools/minicluster run --timeout "$timeout" --done-file "$csv" --mpi "$mpi" --preload "$b/libhier.so" -- \
          "$b/hier-bench" --colls "$colls" --min "$min" --max "$max" --step "$step" --iters "$iters" --warmup 1 --max-iters-bytes $((4 << 20)) \
          --label "$v" --csv "$csv" > "$raw/$tag.$v.$rep.log" 2>&1 || { echo "run failed: $tag $v $rep"; tail -3 "$raw/$tag.$v.$rep.log"; }
        after=$(tools/minicluster links --json)
        d=$(drops_between "$before" "$after")
        echo "$tag $v $rep dropped $d" >> "$raw/drops.txt"
        echo "== $tag: $v rep $rep: packets dropped $d"
        ((d == 0)) || echo "WARNING: $tag $v rep $rep: $d PACKETS DROPPED: its timings include TCP retransmission timeouts" >&2
      done
    done
    # The model's predictions for the same cells (hier-sim: the planner's builders and cost code).
    machine=$raw/$tag.machine.json
    /usr/bin/python3 - "$tune" "$ppn" "$nodes" > "$machine" <<'PY'
import json, sys
tune = json.load(open(sys.argv[1]))
print(json.dumps({"name": "emulated cluster", "levels": [{"name": "node", "size": int(sys.argv[2])}],
                  "nodes": [int(sys.argv[3])], "model": tune}))
PY
    : > "$raw/$tag.sim.csv"
    for c in ${colls//,/ }; do
      for ((bytes = min; bytes <= max; bytes *= step)); do
        # hier-bench's size may be the block per rank; the planner counts the whole call's data.
        simbytes=$(python3 "$root/tools/collectives.py" --sim-bytes "$c" "$bytes" $((nodes * ppn)))
        "$b/hier-sim" --machine "$machine" --coll "$c" --bytes "$simbytes" --csv "$raw/sim.tmp" >/dev/null
        tail -n +2 "$raw/sim.tmp" | sed "s/^/$bytes,/" >> "$raw/$tag.sim.csv"
      done
    done
  done
done
uptime > "$raw/load.txt"
/usr/bin/python3 bench/model/validate_report.py --raw "$raw" --command "$command_line" | tee "$out/report.md"
