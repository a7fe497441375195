#!/bin/bash
# Small MPI_Bcast on the emulated cluster: the MPI alone (HIER_DISABLE=1) against libhier's
# planner (HIER_SHM=auto, the default) from this tree and, optionally, another tree's build
# (BASE=/work/main: before / after a model change), alternated run by run, REPS runs, 4, 8 and 16 KiB
# (hier-bench's size: the whole buffer), 50 iterations each; prints the median of the per-run
# medians (µs) and the ratios, then the links' drop counters. Needs root.
# usage: BASE=/path/to/other/tree bench/hier-bench/bcast_small.sh [MPI] [REPS] [NODES:PPN]   (mpich 3 2:4)
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
mpi=${1:-mpich} reps=${2:-3} shape=${3:-2:4}
here=$PWD/build/$mpi base=${BASE:+$BASE/build/$mpi}
. bench/lib/cluster.sh
bench_cluster_up bcastsmall 4 2
out=/tmp/bcastsmall.$mpi; bench_outdir $out
bench_cluster_warm $mpi $here
n=${shape%:*} p=${shape#*:}
variants="mpi after${base:+ before}"
for rep in $(seq $reps); do
  for v in $variants; do
    case $v in mpi) e=(HIER_DISABLE=1) lib=$here;; after) e=(HIER_SHM=auto) lib=$here;; before) e=(HIER_SHM=auto) lib=$base;; esac
    env "${e[@]}" tools/minicluster --name bcastsmall run --timeout 120 --done-file $out/$v.$rep.csv --mpi $mpi \
      --use-nodes $n --ppn $p --preload $lib/libhier.so -- $here/hier-bench --colls bcast --min 4096 --max 16384 \
      --step 2 --iters 50 --warmup 5 --csv $out/$v.$rep.csv >/dev/null 2>&1
  done
done
python3 - $out "$variants" <<'PY'
import collections, csv, statistics, sys, glob
out, variants = sys.argv[1], sys.argv[2].split()
d = collections.defaultdict(list)
for v in variants:
    for f in glob.glob(f"{out}/{v}.*.csv"):
        for row in csv.DictReader(open(f)):
            d[(int(row["bytes"]), v)].append(float(row["median_us"]))
print("| bytes | " + " | ".join(f"{v} us [runs]" for v in variants) + " | " + " | ".join(f"MPI / {v}" for v in variants[1:]) + " |")
print("|---:|" + "---:|" * (2 * len(variants) - 1))
for b in sorted({b for b, _ in d}):
    m = {v: statistics.median(d[(b, v)]) for v in variants if d[(b, v)]}
    cells = [f"{m[v]:.0f} [{' '.join(f'{x:.0f}' for x in sorted(d[(b, v)]))}]" for v in variants if v in m]
    ratios = [f"{m['mpi'] / m[v]:.2f}x" for v in variants[1:] if v in m]
    print(f"| {b} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY
bench_cluster_links
