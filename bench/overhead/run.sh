#!/bin/bash
# Passthrough overhead of libhier, both MPIs, in one invocation per MPI.
# usage: bench/overhead/run.sh [iterations per block] [blocks] [wall|cpu]   (cpu: see overhead.c)
# HIER_WATCHDOG=N in the environment runs it with the hang watchdog on (compare with 0);
# HIER_REPORT=path (e.g. /tmp/ov.%r.json) with the call-site timing on (docs/diagnostics.md).
# Needs build/<mpi>/ from tools/test.sh (or cmake --build --preset <mpi>); OVERHEAD_BUILD_PREFIX=build/h-
# takes build/h-<mpi>/ instead.
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-20000}
blocks=${2:-21}
clock=${3:-wall}
np=${OVERHEAD_NP:-2}  # 1: the wrapper cost alone (no peer to wait for), for loaded machines
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for mpi in openmpi mpich; do
  b=${OVERHEAD_BUILD_PREFIX:-build/}$mpi
  [[ -x $b/bench/overhead/bench_overhead ]] || { echo "skip $mpi: $b not built"; continue; }
  if [[ $mpi == openmpi ]]; then env_flag=(-x "LD_PRELOAD=$PWD/$b/libhier.so" -x "HIER_WATCHDOG=${HIER_WATCHDOG:-0}"); extra=(--oversubscribe --bind-to none);
  else env_flag=(-genv LD_PRELOAD "$PWD/$b/libhier.so" -genv HIER_WATCHDOG "${HIER_WATCHDOG:-0}"); extra=(); fi
  if [[ -n ${HIER_REPORT:-} ]]; then
    if [[ $mpi == openmpi ]]; then env_flag+=(-x "HIER_REPORT=$HIER_REPORT"); else env_flag+=(-genv HIER_REPORT "$HIER_REPORT"); fi
  fi
  echo "== $mpi, $np rank(s), libhier preloaded: MPI_X (wrapped) vs PMPI_X (direct), interleaved blocks"
  mpiexec.$mpi "${extra[@]}" "${env_flag[@]}" -n "$np" $b/bench/overhead/bench_overhead "$iters" "$blocks" "$clock"
done
