# The emulated-cluster benchmarks' shared lifecycle (tools/minicluster, docs/minicluster.md):
# sourced by bench/*/*.sh from the repository root. One cluster per script, named so that two
# scripts never share one; it is brought up fresh (counters from zero), taken down when the
# script exits however it exits, and its per-node drop counters are printed at the end: a timing
# taken over a link that dropped packets includes TCP retransmission timeouts and is not kept.

# bench_cluster_up NAME NODES PPN [LINK]: a fresh cluster (LINK default 1gbit), down at exit.
bench_cluster_up() {
  BENCH_CLUSTER=$1
  tools/minicluster --name "$1" down >/dev/null 2>&1
  tools/minicluster --name "$1" up --nodes "$2" --ppn "$3" --link "${4:-1gbit}" >/dev/null ||
    { echo "$0: tools/minicluster could not bring up cluster '$1' (needs root)" >&2; exit 1; }
  trap 'tools/minicluster --name "$BENCH_CLUSTER" down >/dev/null 2>&1' EXIT
}

# bench_cluster_warm MPI BUILD: one short run across two nodes, so that the first measured run
# does not pay for the links' first connections. It ends after 60 s at most: MPICH over UCX/TCP
# may hang in MPI_Finalize (README, limitations).
bench_cluster_warm() {
  tools/minicluster --name "$BENCH_CLUSTER" run --timeout 60 --mpi "$1" --use-nodes 2 --ppn 2 -- "$2/hier-bench" \
    --colls allreduce --min 1048576 --max 1048576 --iters 2 >/dev/null 2>&1
}

# bench_cluster_sent: "BYTES DROPS", all links' totals so far (a run's share is the difference).
bench_cluster_sent() {
  tools/minicluster --name "$BENCH_CLUSTER" links --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["total_sent_bytes"], j["total_dropped"])'
}

# bench_cluster_links: the per-node counters table (sent, dropped) for the results.
bench_cluster_links() {
  tools/minicluster --name "$BENCH_CLUSTER" links 2>&1
}

# bench_outdir DIR: an empty directory for a script's raw results.
bench_outdir() {
  rm -rf "$1" && mkdir -p "$1"
}
