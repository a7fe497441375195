#!/bin/bash
# tests/cluster/smoke.sh LIBHIER MPI TRAIN_MLP [LAUNCHER]
#
# Smoke test on the emulated cluster (tools/minicluster): 2 nodes x 2 ranks joined by 1 Gbit/s
# links. Runs examples/train_mlp in both modes (ddp: MPI_Allreduce; zero: MPI_Allgather +
# MPI_Reduce_scatter_block), without libhier and with LIBHIER preloaded, and checks that
#   - every run succeeds and prints a final_loss,
#   - all runs print the same final_loss to the last digit (train_mlp's default exact-sum mode
#     makes the reduced gradients independent of reduction order, so any difference is a wrong
#     result, not rounding; ddp and zero do the same arithmetic),
#   - each run moved at least its gradient volume per step across the links (tc counters), i.e.
#     the traffic really crossed the emulated network,
#   - with libhier: every rank wrote its report (HIER_REPORT reached every rank through the
#     launcher), every rank's report shows the HIER_ALGO value the test set (another HIER_*
#     variable that must propagate), and ranks of both nodes made hierarchical calls.
#
#   LIBHIER   path of libhier.so; empty or absent: no libhier yet, run without it only
#   MPI       openmpi | mpich (the family LIBHIER and TRAIN_MLP were built for)
#   TRAIN_MLP path of the train_mlp binary
#   LAUNCHER  mpiexec (default: the MPI's own, through the ssh stand-in) or srun (Slurm started
#             on the cluster by 'minicluster up --slurm': slurmctld + one slurmd per node)
#
# Exit: 0 pass, 1 fail, 77 skip (not root, network namespaces unavailable, or for srun: Debian's
# slurmctld/slurmd/slurm-client not installed), as ctest's
# SKIP_RETURN_CODE expects. The cluster is always torn down (trap), also on failure or signal.
# The caller's HIER_* variables are cleared: the test checks libhier with its defaults.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mc=$here/../../tools/minicluster
lib=${1:-}
mpi=${2:-}
prog=${3:-}
launcher=${4:-mpiexec}

STEPS=6        # few steps: the point is correctness, not timing
WIDTH=512      # 0.3 M parameters = 1.2 MiB of gradients: large enough for libhier's schedules
BATCH=4
RUN_TIMEOUT=45 # one run takes a few seconds; a hang must not eat the ctest budget

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# --- can we run at all? ----------------------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, mounts)"
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || skip "ip/tc (iproute2) not installed"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 missing (tools/minicluster needs it)"
probe=mcprobe$$
if ! ip netns add "$probe" >/dev/null 2>&1; then
  skip "'ip netns add' does not work here (container without CAP_SYS_ADMIN?)"
fi
ip netns del "$probe"

case "$launcher" in
  mpiexec) ;;
  srun) for t in slurmctld slurmd srun sinfo; do
          command -v $t >/dev/null 2>&1 || skip "launcher srun: '$t' not installed (Debian: apt-get install slurmctld slurmd slurm-client)"
        done ;;
  *) fail "LAUNCHER must be mpiexec or srun, not '$launcher'" ;;
esac
[ -x "$mc" ] || fail "tools/minicluster not found at $mc"
case "$mpi" in
  openmpi|mpich) ;;
  *) fail "usage: smoke.sh LIBHIER openmpi|mpich TRAIN_MLP (got MPI '$mpi')" ;;
esac
[ -n "$prog" ] && [ -x "$prog" ] || fail "train_mlp binary '$prog' is not an executable file"
command -v "mpiexec.$mpi" >/dev/null 2>&1 || fail "mpiexec.$mpi not found"
if [ -n "$lib" ] && [ ! -f "$lib" ]; then
  fail "libhier '$lib' does not exist (pass an empty first argument to run without libhier)"
fi

for v in $(compgen -e | grep '^HIER_'); do unset "$v"; done

# A cluster name of our own, so that a cluster someone else has up is never touched.
export MINICLUSTER_NAME=smoke$$
work=$(mktemp -d /tmp/hier-smoke.XXXXXX)
cleanup() {
  if [ -n "${job:-}" ]; then kill -TERM "$job" 2>/dev/null; wait "$job" 2>/dev/null; fi
  "$mc" down >/dev/null 2>&1 || echo "WARNING: '$mc down' failed; run: MINICLUSTER_NAME=$MINICLUSTER_NAME $mc down"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM HUP

up_args=(--nodes 2 --ppn 2 --link 1gbit)
[ "$launcher" = srun ] && up_args+=(--slurm)
t_up=$SECONDS
"$mc" up "${up_args[@]}" || fail "minicluster up failed"
echo "  cluster up in $((SECONDS - t_up)) s"

sent_total() {
  "$mc" links --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["total_sent_bytes"])'
}

# run LABEL PRELOAD MODE: sets $loss; fails the test on any error.
#
# MPICH 4.0.2 over UCX 1.13's TCP transport often hangs inside MPI_Finalize, after the program's
# work is done: a rank's endpoint flush waits for an answer from a peer that has already left
# the flush and sits in the PMI barrier (docs/minicluster.md has the analysis; it happens
# without libhier, more often the more rank pairs talked across nodes). For MPICH only, a job
# that printed its final line and then does not exit within FINALIZE_GRACE seconds is ended
# and its result accepted, with a note. Anything else that does not exit is a failure. The grace
# is FINALIZE_GRACE_READY once nothing more is awaited: every rank's report written (runs with
# libhier; libhier writes it before PMPI_Finalize), or at once (runs without): a clean exit
# takes well under a second, and the hang, when it comes, cost the whole 8 s (1-2 per MPICH run
# of this test: 18.7 s against Open MPI's 4.1 s, 29.2 s against 12.9 s under srun; ci6.log).
FINALIZE_GRACE=8 FINALIZE_GRACE_READY=2
job=
run() {
  local label=$1 preload=$2 mode=$3 out=$work/${1//\//_}.out rc before after t0 t1 done_at= hung= grace
  local args=(--mpi "$mpi" --launcher "$launcher" --timeout "$RUN_TIMEOUT") envs=()
  local reports=$work/${1//\//_}.reports
  if [ -n "$preload" ]; then
    args+=(--preload "$preload")
    mkdir -p "$reports"
    envs=(HIER_REPORT="$reports/report.%r.json" HIER_ALGO=bcast=flat)
  fi
  before=$(sent_total)
  t0=$(date +%s.%N)
  env "${envs[@]}" "$mc" run "${args[@]}" -- "$prog" --mode "$mode" --steps "$STEPS" --width "$WIDTH" \
    --batch "$BATCH" --print-every 0 >"$out" 2>&1 &
  job=$!
  while kill -0 "$job" 2>/dev/null; do
    if [ "$mpi" = mpich ]; then
      if [ -z "$done_at" ] && grep -q '^final_loss=' "$out"; then done_at=$SECONDS; fi
      grace=$FINALIZE_GRACE
      if [ -z "$preload" ] || [ "$(compgen -G "$reports/report.*.json" | wc -l)" -ge 4 ]; then
        grace=$FINALIZE_GRACE_READY
      fi
      if [ -n "$done_at" ] && [ $((SECONDS - done_at)) -ge "$grace" ]; then
        hung=1
        kill -TERM "$job" 2>/dev/null   # minicluster run ends the job and what it left
        break
      fi
    fi
    sleep 0.2
  done
  wait "$job"
  rc=$?
  job=
  t1=$(date +%s.%N)
  after=$(sent_total)
  if [ -n "$hung" ]; then
    echo "  $label: done, then hung in MPI_Finalize (known MPICH 4.0.2/UCX TCP issue); job ended, result kept"
  elif [ "$rc" != 0 ]; then
    sed 's/^/    | /' "$out" | tail -n 30
    fail "$label: exit status $rc"
  fi
  if grep -q 'ended with different parameters' "$out"; then
    sed 's/^/    | /' "$out" | tail -n 30
    fail "$label: ranks ended with different parameters"
  fi
  local line grad_bytes
  line=$(grep '^final_loss=' "$out" | tail -n 1)
  [ -n "$line" ] || { sed 's/^/    | /' "$out" | tail -n 30; fail "$label: no final_loss line"; }
  loss=$(sed -n 's/^final_loss=\([^ ]*\).*/\1/p' <<<"$line")
  grad_bytes=$(sed -n 's/.* grad_bytes=\([0-9]*\).*/\1/p' <<<"$line")
  local crossed=$((after - before)) need=$((grad_bytes * STEPS))
  # Lower bound: each node must receive the other node's contribution to every gradient
  # element each step (>= grad_bytes per direction); require half of the two directions.
  awk -v l="$label" -v f="$loss" -v t0="$t0" -v t1="$t1" -v c="$crossed" \
    'BEGIN { printf "  %-24s final_loss=%s  %5.1f s  %6.1f MB crossed the links\n", l, f, t1 - t0, c / 1e6 }'
  [ "$crossed" -ge "$need" ] || fail "$label: only $crossed bytes crossed the links, expected >= $need"
  [ -n "$preload" ] && check_reports "$label" "$reports"
  return 0
}

# check_reports LABEL DIR: one report per rank (4), each with the HIER_ALGO the test set, and
# hierarchical calls made on both nodes (the hostnames minicluster gives them).
check_reports() {
  /usr/bin/python3 - "$1" "$2" "$MINICLUSTER_NAME" <<'PY' || fail "$1: report check failed"
import glob, json, sys
label, d, cluster = sys.argv[1:]
files = sorted(glob.glob(d + "/report.*.json"))
if len(files) != 4:
    sys.exit(f"FAIL: {label}: {len(files)} reports in {d}, expected 4 (HIER_REPORT did not reach every rank?)")
hier_hosts = {}
for f in files:
    r = json.load(open(f))
    if r["config"]["HIER_ALGO"].get("bcast") != "flat":
        sys.exit(f"FAIL: {label}: rank {r['rank']} did not get HIER_ALGO=bcast=flat: {r['config']['HIER_ALGO']}")
    n = sum(a.get("calls", 0) for fn in r["functions"].values()
            for name, a in fn.get("algorithms", {}).items() if name.startswith("hier"))
    hier_hosts[r["host"]] = hier_hosts.get(r["host"], 0) + n
want = {f"{cluster}-n0", f"{cluster}-n1"}
if set(hier_hosts) != want or not all(hier_hosts.values()):
    sys.exit(f"FAIL: {label}: hierarchical calls per node {hier_hosts}, expected some on each of {sorted(want)}")
print(f"    reports: 4 ranks, HIER_* propagated, hierarchical calls per node {hier_hosts}")
PY
}

echo "cluster.smoke: $mpi, launcher $launcher, 2 nodes x 2 ranks, 1gbit; train_mlp --steps $STEPS --width $WIDTH --batch $BATCH"
declare -A losses
for mode in ddp zero; do
  run "$mode/without-libhier" "" "$mode"
  losses[$mode/without]=$loss
  if [ -n "$lib" ]; then
    run "$mode/with-libhier" "$lib" "$mode"
    losses[$mode/with]=$loss
  fi
done
[ -n "$lib" ] || echo "  (no libhier given: ran without it only)"

ref=${losses[ddp/without]}
for k in "${!losses[@]}"; do
  [ "${losses[$k]}" = "$ref" ] || fail "final_loss differs: $k gave ${losses[$k]}, ddp/without gave $ref"
done
echo "PASS: all runs agree on final_loss=$ref"
