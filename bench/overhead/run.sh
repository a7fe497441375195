#!/bin/bash
# Passthrough overhead of libhier, both MPIs, in one invocation per MPI.
#   bench/overhead/run.sh [iterations per block] [blocks]
# HIER_WATCHDOG=N in the environment runs it with the hang watchdog on (compare with 0).
# Needs build/<mpi>/ from tools/test.sh (or cmake --build --preset <mpi>).
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-20000}
blocks=${2:-21}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for mpi in openmpi mpich; do
  b=build/$mpi
  [[ -x $b/bench/overhead/bench_overhead ]] || { echo "skip $mpi: $b not built"; continue; }
  if [[ $mpi == openmpi ]]; then env_flag=(-x "LD_PRELOAD=$PWD/$b/libhier.so" -x "HIER_WATCHDOG=${HIER_WATCHDOG:-0}"); extra=(--oversubscribe --bind-to none);
  else env_flag=(-genv LD_PRELOAD "$PWD/$b/libhier.so" -genv HIER_WATCHDOG "${HIER_WATCHDOG:-0}"); extra=(); fi
  echo "== $mpi, 2 ranks, libhier preloaded: MPI_X (wrapped) vs PMPI_X (direct), interleaved blocks"
  mpiexec.$mpi "${extra[@]}" "${env_flag[@]}" -n 2 $b/bench/overhead/bench_overhead "$iters" "$blocks"
done
