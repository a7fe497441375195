#!/bin/bash
# Issue 26, "nonblocking calls never slower than the MPI's own": a 16 MiB float32 MPI_Iallreduce
# followed at once by MPI_Wait, HIER_PROGRESS=thread (bench_overlap's t_comm, median of --iters 3) on the emulated
# cluster, the MPI alone against libhier with the built-in model and libhier with a tune file
# that hier-tune measured on the same shape (with libhier preloaded: flat_measured_nonblocking
# and hier_measured_nonblocking, which the planner weighs for a nonblocking call). The variants
# alternate run by run, REPS runs each; prints per shape the median t_comm (ms) and its ratio to
# the MPI alone's, then the packets each node's link dropped. Also t_total (the call beside a
# fixed computation as long as it) and the share of the communication hidden. VARIANTS="mpi
# builtin" leaves out hier-tune and the tuned runs. Needs root.
# usage: [VARIANTS="mpi builtin tuned"] bench/nonblocking/iallreduce_shapes.sh [MPI] [REPS] [SHAPES]
#        (defaults: openmpi 3 "2:2 4:2")
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
mpi=${1:-openmpi} reps=${2:-3} shapes=${3:-"2:2 4:2"} variants=${VARIANTS:-mpi builtin tuned}
b=$PWD/build/$mpi
name=nbs
. bench/lib/cluster.sh
bench_cluster_up $name 4 2
out=/tmp/nbshapes.$mpi; bench_outdir $out
for shape in $shapes; do
  [[ " $variants " == *" tuned "* ]] || break
  n=${shape%:*} p=${shape#*:}
  tools/minicluster --name $name run --timeout 900 --done-file $out/tune.$n.$p.json --mpi $mpi --use-nodes $n --ppn $p \
    --preload $b/libhier.so -- $b/hier-tune -o $out/tune.$n.$p.json > $out/tune.$n.$p.log 2>&1
  [ -s $out/tune.$n.$p.json ] || { echo "hier-tune failed on $n x $p: $(tail -3 $out/tune.$n.$p.log)"; exit 1; }
done
run() { # nodes ppn variant rep
  local n=$1 p=$2 v=$3 rep=$4 envs=(HIER_PROGRESS=thread) pre=(--preload $b/libhier.so)
  case $v in
    mpi) envs+=(HIER_DISABLE=1);;
    builtin) ;;
    tuned) envs+=(HIER_TUNE_FILE=$out/tune.$n.$p.json);;
  esac
  local f=$out/$n.$p.$v.$rep
  env "${envs[@]}" tools/minicluster --name $name run --timeout 300 --done-file $f.done --mpi $mpi --use-nodes $n \
    --ppn $p "${pre[@]}" -- $b/bench/nonblocking/bench_overlap --iters 3 --work fixed --done $f.done > $f.txt 2>&1
}
for rep in $(seq 1 "$reps"); do
  for shape in $shapes; do
    for v in $variants; do run ${shape%:*} ${shape#*:} $v $rep; done
  done
done
python3 - "$out" "$shapes" <<'PY'
import glob, re, statistics, sys
out, shapes = sys.argv[1], sys.argv[2].split()
def field(path, key):
    m = re.search(key + r" ([0-9.]+)", open(path).read())
    return float(m.group(1)) if m else None
for key, what in (("t_comm_ms", "bare (MPI_Iallreduce + MPI_Wait), ms"), ("t_total_ms", "beside computation (t_total), ms"),
                  ("overlap_pct", "share of the communication hidden, %")):
    print(f"\n{what}\n| nodes x ranks | MPI alone | libhier built-in model | libhier + hier-tune file |")
    print("|---|---:|---:|---:|")
    for s in shapes:
        n, p = s.split(":")
        cells, base = [], None
        for v in ("mpi", "builtin", "tuned"):
            runs = sorted(x for x in (field(f, key) for f in glob.glob(f"{out}/{n}.{p}.{v}.*.txt")) if x is not None)
            if not runs:
                cells.append("-"); continue
            m = statistics.median(runs)
            base = m if v == "mpi" else base
            ratio = f" ({m / base:.2f}x the MPI)" if base and v != "mpi" and key != "overlap_pct" else ""
            cells.append(f"{m:.0f} [{' '.join(f'{x:.0f}' for x in runs)}]{ratio}")
        print(f"| {n} x {p} | " + " | ".join(cells) + " |")
PY
bench_cluster_links
