#!/bin/bash
# Runs hier-bench on the emulated cluster for every variant, both MPIs, and writes
# bench/RESULTS-cluster.md (tables with ratios and the link-bound floor) plus a PNG plot per
# collective under bench/plots/. Needs root (tools/minicluster) and builds from tools/test.sh
# or cmake --build --preset <mpi>.
#
# usage: tools/bench-cluster.sh [--nodes 2] [--ppn 4] [--link 1gbit] [--mpis "openmpi mpich"]
#                               [--colls allreduce,allgather,reduce_scatter_block,bcast]
#                               [--min 8] [--max 16777216] [--iters 10] [--reps 2] [--timeout 600]
#                               [--out DIR]
#
# Variants (same launcher options for all; only the library and its knobs differ):
#   mpi      libhier preloaded with HIER_DISABLE=1 (pure passthrough: the MPI's own algorithms)
#   han      Open MPI only: coll/han forced (--mca coll_han_priority 100), libhier disabled
#   hier     libhier, every call hierarchical (HIER_ALGO=hier; HIER_LEVELS=auto): what the planner's
#            windows in src/sched/tuning.cpp are read from (auto = hier inside them, mpi outside)
# Variants alternate (mpi, han, hier, mpi, han, hier, ...) and the median over --reps is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/lib/help.sh
hier_help "$@"
root=$PWD
command_line="tools/bench-cluster.sh $*"
nodes=2 ppn=4 link=1gbit mpis="openmpi mpich" colls=allreduce,allgather,reduce_scatter_block,bcast
min=8 max=$((16 << 20)) iters=10 reps=2 out=bench timeout=600
while (($#)); do
  case $1 in
    --nodes) nodes=$2; shift 2;; --ppn) ppn=$2; shift 2;; --link) link=$2; shift 2;;
    --mpis) mpis=$2; shift 2;; --colls) colls=$2; shift 2;; --min) min=$2; shift 2;;
    --max) max=$2; shift 2;; --iters) iters=$2; shift 2;; --reps) reps=$2; shift 2;;
    --out) out=$2; shift 2;; --timeout) timeout=$2; shift 2;;
    *) echo "bench-cluster.sh: unknown option $1 (see the header of this script)" >&2; exit 2;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "bench-cluster.sh: needs root (network namespaces)" >&2; exit 2; }
for mpi in $mpis; do
  [[ -x build/$mpi/hier-bench && -x build/$mpi/link-probe && -f build/$mpi/libhier.so ]] || { cmake --preset "$mpi" >/dev/null && cmake --build --preset "$mpi" >/dev/null; }
done
command -v gnuplot >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null || true

# Raw CSVs and link counters are kept on purpose (path printed at the end) so tables can be re-made.
raw=$(mktemp -d /tmp/bench-cluster.XXXXXX)
cleanup() { tools/minicluster down >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
tools/minicluster down >/dev/null 2>&1 || true
tools/minicluster up --nodes "$nodes" --ppn "$ppn" --link "$link"

bench_args=(--colls "$colls" --min "$min" --max "$max" --iters "$iters" --warmup 2)
run_variant() {  # mpi variant rep
  local mpi=$1 variant=$2 rep=$3 extra=() envs=()
  case $variant in
    mpi) envs=(HIER_DISABLE=1);;
    han) envs=(HIER_DISABLE=1); extra=(-X "--mca coll_han_priority 100 --mca coll_adapt_priority 0");;
    hier) envs=(HIER_ALGO=hier);;
  esac
  local before after
  before=$(tools/minicluster links --json)
  # A run that hangs at finalize (MPICH/UCX, openucx/ucx#8738) after writing its CSV is ended
  # 10 s later (--done-file); one that hangs earlier is ended after --timeout, its rows are then
  # missing from the tables (the report says so) and the next run goes on.
  env "${envs[@]}" tools/minicluster run --timeout "$timeout" --done-file "$raw/$mpi.$variant.$rep.csv" --mpi "$mpi" \
    --preload "$root/build/$mpi/libhier.so" "${extra[@]}" -- \
    "$root/build/$mpi/hier-bench" "${bench_args[@]}" --label "$mpi/$variant" --csv "$raw/$mpi.$variant.$rep.csv" \
    > "$raw/$mpi.$variant.$rep.log" 2>&1 || { echo "run failed: $mpi $variant $rep (log tail below; going on)"; tail -5 "$raw/$mpi.$variant.$rep.log"
    echo "$mpi $variant $rep" >> "$raw/failed.txt"; }
  # Recorded also after a failure: a run killed in a finalize hang still moved its data.
  after=$(tools/minicluster links --json)
  printf '%s\n%s\n' "$before" "$after" > "$raw/$mpi.$variant.$rep.links"
  local drops
  drops=$(/usr/bin/python3 -c 'import json,sys; a,b=[json.loads(x) for x in sys.argv[1:]]; print(b["total_dropped"]-a["total_dropped"])' "$before" "$after")
  echo "   packets dropped on the links: $drops"
  ((drops == 0)) || echo "WARNING: $mpi $variant rep $rep: $drops PACKETS DROPPED: its timings include TCP retransmission timeouts" >&2
}

for mpi in $mpis; do
  variants="mpi hier"
  [[ $mpi == openmpi ]] && variants="mpi han hier"
  echo "== $mpi: warm-up"
  tools/minicluster run --timeout "$timeout" --mpi "$mpi" --preload "$root/build/$mpi/libhier.so" -- "$root/build/$mpi/hier-bench" --colls allreduce --min 1024 --max 1048576 --iters 2 >/dev/null 2>&1 || true
  for rep in $(seq 1 "$reps"); do
    for v in $variants; do
      echo "== $mpi: $v (rep $rep/$reps)"
      run_variant "$mpi" "$v" "$rep"
    done
  done
done
# Focus: bytes over the links for one 16 MiB float32 Allreduce (1 warm-up + 5 timed calls;
# bench_report.py divides the link counters by the calls the CSV reports).
for mpi in $mpis; do
  variants="mpi hier"
  [[ $mpi == openmpi ]] && variants="mpi han hier"
  for v in $variants; do
    echo "== $mpi: $v, 16 MiB allreduce link bytes"
    bench_args=(--colls allreduce --min $((16 << 20)) --max $((16 << 20)) --iters 5 --warmup 1 --max-iters-bytes $((16 << 20)))
    run_variant "$mpi" "$v" focus
  done
done
# The practical floor: raw pair traffic across the links, the MPI alone (3 runs each).
for mpi in $mpis; do
  for rep in 1 2 3; do
    tools/minicluster run --timeout "$timeout" --mpi "$mpi" -- "$root/build/$mpi/link-probe" --bytes $((16 << 20)) \
      >> "$raw/$mpi.probe.txt" 2>&1 || echo "$mpi link-probe $rep" >> "$raw/failed.txt"
  done
done
uptime > "$raw/load.txt"
mkdir -p "$out"
/usr/bin/python3 tools/bench_report.py --raw "$raw" --nodes "$nodes" --ppn "$ppn" --link "$link" \
  --out "$out" --command "$command_line"
echo "raw data: $raw"
