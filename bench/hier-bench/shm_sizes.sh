#!/bin/bash
# HIER_SHM's default across sizes: the MPI alone (HIER_DISABLE=1), libhier with HIER_SHM=off and
# with HIER_SHM=auto (the default), alternated, REPS runs each, on one shape of the emulated
# cluster (1 Gbit/s links); allreduce, reduce_scatter_block, allgather, bcast, reduce and barrier
# at 4 KiB, 64 KiB, 1 MiB and 16 MiB per rank (hier-bench's size semantics). Prints the median of
# the per-run medians (µs) and the ratios, then the links' drop counters. Needs root.
# usage: bench/hier-bench/shm_sizes.sh [MPI] [REPS] [NODES:PPN]   (defaults: openmpi 2 2:4)
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
cd "$(dirname "$0")/../.."
mpi=${1:-openmpi} reps=${2:-2} shape=${3:-2:4}
b=$PWD/build/$mpi
. bench/lib/cluster.sh
bench_cluster_up shmsizes 4 2
out=/tmp/shmsizes.$mpi; bench_outdir $out
bench_cluster_warm $mpi $b
n=${shape%:*} p=${shape#*:}
for rep in $(seq $reps); do
  for v in mpi off auto; do
    case $v in mpi) e=(HIER_DISABLE=1);; off) e=(HIER_SHM=off);; auto) e=(HIER_SHM=auto);; esac
    env "${e[@]}" tools/minicluster --name shmsizes run --timeout 300 --done-file $out/$v.$rep.csv --mpi $mpi \
      --use-nodes $n --ppn $p --preload $b/libhier.so -- $b/hier-bench \
      --colls allreduce,reduce_scatter_block,allgather,bcast,reduce,barrier --min 4096 --max 16777216 --step 16 \
      --iters 10 --warmup 2 --max-iters-bytes 67108864 --csv $out/$v.$rep.csv >/dev/null 2>&1
  done
done
python3 - $out $reps <<'PY'
import collections, csv, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
d = collections.defaultdict(list)
for v in ("mpi", "off", "auto"):
    for r in range(1, reps + 1):
        try:
            for row in csv.DictReader(open(f"{out}/{v}.{r}.csv")):
                d[(row["collective"], int(row["bytes"]), v)].append(float(row["median_us"]))
        except FileNotFoundError:
            print(f"missing: {v} run {r}", file=sys.stderr)
print("| collective | bytes | MPI us | off us | auto us | auto vs off | auto vs MPI |")
print("|---|---:|---:|---:|---:|---:|---:|")
for c, size in sorted({(c, s) for c, s, _ in d}):
    m = {v: statistics.median(d[(c, size, v)]) if d[(c, size, v)] else float("nan") for v in ("mpi", "off", "auto")}
    print(f"| {c} | {size} | {m['mpi']:.0f} | {m['off']:.0f} | {m['auto']:.0f} | {m['off'] / m['auto']:.2f}x | {m['mpi'] / m['auto']:.2f}x |")
PY
bench_cluster_links
