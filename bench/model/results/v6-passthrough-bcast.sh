#!/bin/bash
# Is a flat-planned (passed-through) bcast slower under libhier than with HIER_DISABLE=1?
cd /work/main
export MINICLUSTER_NAME=pt
tools/minicluster up --nodes 2 --ppn 4 --link 1gbit >/dev/null
b=$PWD/build/mpich; T=$PWD/bench/model/results/v6val-tune-mpich-2x4.json
for rep in 1 2 3; do
  for v in off flat auto hier; do
    case $v in off) e=(HIER_DISABLE=1);; flat) e=(HIER_ALGO=flat);; auto) e=(HIER_TUNE_FILE=$T);; hier) e=(HIER_ALGO=hier HIER_TUNE_FILE=$T);; esac
    env "${e[@]}" tools/minicluster run --timeout 200 --done-file /work/meas/v6/pt.$v.$rep.csv --mpi mpich --preload $b/libhier.so -- $b/hier-bench --colls bcast --min 65536 --max 262144 --step 2 --iters 8 --warmup 1 --label $v --csv /work/meas/v6/pt.$v.$rep.csv >/dev/null 2>&1
  done
done
tools/minicluster down >/dev/null
cat /work/meas/v6/pt.*.csv | grep bcast | sort -t, -k1,1 -k4,4n
