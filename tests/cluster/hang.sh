#!/bin/bash
# tests/cluster/hang.sh LIBHIER MPI DIAG_HANG MODE [TEST_PRELOAD]
#
# The hang watchdog across the emulated cluster's nodes (issue 14): 4 nodes x 1 rank, so that
# every question the watchdog asks goes over the side channel between network namespaces (no
# shared memory, no shared file system between the ranks' hosts but /tmp, where the reports
# go). tests/diag/run_hang.py runs the fault case MODE (its CLUSTER_MODES: none, sleep, stop,
# split and the nonblocking isleep, isleep_thread, istop, imismatch) with --cluster and checks the
# report as on one machine: the right missing rank, its state, file:line and C4 class, within the
# limit + 5 s; every node also has a second interface (side0) that the job does not use, on which
# no rank's side channel may listen (checked in the sleep mode). TEST_PRELOAD: preloaded after LIBHIER (MPICH's yield wrapper, cmake/HierTesting.cmake).
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
# A second interface in every node that the job does not use (one end of a veth pair whose other
# end stays in the node, a subnet of its own per node): the watchdog's side channel must not
# listen on it (run_hang.py checks in the sleep mode).
i=0
for ns in $("$mc" --name "$name" status --json | /usr/bin/python3 -c 'import json,sys; print(" ".join(n["ns"] for n in json.load(sys.stdin)["node_list"]))'); do
  ip -n "$ns" link add side0 type veth peer name side1 && ip -n "$ns" addr add "10.254.$i.1/24" dev side0 &&
    ip -n "$ns" link set side1 up && ip -n "$ns" link set side0 up || { echo "FAIL: no second interface in $ns"; exit 1; }
  i=$((i + 1))
done
/usr/bin/python3 "$here/../diag/run_hang.py" --mpi "$mpi" --mpiexec "mpiexec.$mpi" --lib "$lib" --exe "$exe" \
  --src "$here/../diag/hang.c" --test-preload "$test_preload" --cluster "$name" "$mode"
