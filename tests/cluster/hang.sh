#!/bin/bash
# tests/cluster/hang.sh LIBHIER MPI DIAG_HANG MODE [TEST_PRELOAD]
#
# The hang watchdog across the emulated cluster's nodes (issue 14): 4 nodes x 1 rank, so that
# every question the watchdog asks goes over the side channel between network namespaces (no
# shared memory, no shared file system between the ranks' hosts but /tmp, where the reports
# go). tests/diag/run_hang.py runs the fault case MODE (its CLUSTER_MODES: none, sleep, stop,
# split and the nonblocking isleep, isleep_thread, istop, imismatch) with --cluster and checks the
# report as on one machine: the right missing rank, its state, file:line and C4 class, within the
# limit + 5 s. TEST_PRELOAD: preloaded after LIBHIER (MPICH's yield wrapper, cmake/HierTesting.cmake).
# Exit: 0 pass, 1 fail, 77 skip (not root, or network namespaces unavailable). The cluster is
# always torn down.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mc=$here/../../tools/minicluster
lib=$1 mpi=$2 exe=$3 mode=$4 test_preload=${5:-}

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
probe=mcprobe$$
ip netns add "$probe" >/dev/null 2>&1 || { echo "SKIP: 'ip netns add' does not work here"; exit 77; }
ip netns del "$probe"

for v in $(compgen -e | grep '^HIER_'); do unset "$v"; done
name=hang$$
trap '"$mc" --name "$name" down >/dev/null 2>&1' EXIT
"$mc" --name "$name" up --nodes 4 --ppn 1 --link 1gbit >/dev/null || { echo "FAIL: minicluster up"; exit 1; }
/usr/bin/python3 "$here/../diag/run_hang.py" --mpi "$mpi" --mpiexec "mpiexec.$mpi" --lib "$lib" --exe "$exe" \
  --src "$here/../diag/hang.c" --test-preload "$test_preload" --cluster "$name" "$mode"
