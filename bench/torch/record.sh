#!/bin/bash
# The record run for issue 41 (bench/RESULTS.md, "Session 20, torch"): examples/torch_train.py on
# the emulated 2 x 4 cluster, four variants each (MPI alone, libhier exact, int8 and int4 with
# error feedback), --steps 300 by default, in ddp, zero and ddp --overlap. Each mode's table goes
# to OUT/<mode>.log and its picture to OUT/<mode>/torch-demo.png. About 30 minutes per mode on
# an idle 2-core machine (8 ranks of a 1 M-parameter model share the 2 cores).
# usage: bench/torch/record.sh [--steps N] [--out DIR] [--modes 'ddp zero overlap']
#                              [--variants 'mpi exact int8 int4'] (fewer variants: a shorter run)
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=300 out=bench-torch modes="ddp zero overlap" variants="mpi exact int8 int4"
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2;; --out) out=$2; shift 2;; --modes) modes=$2; shift 2;; --variants) variants=$2; shift 2;;
    *) echo "record.sh: unknown option $1 (--steps, --out, --modes, --variants)" >&2; exit 2;;
  esac
done
for m in $modes; do
  mkdir -p "$out/$m"
  case $m in
    ddp|zero) flags=(--mode "$m");;
    overlap) flags=(--mode ddp --overlap);;
    *) echo "record.sh: mode $m is not ddp, zero or overlap" >&2; exit 2;;
  esac
  echo "== $m: tools/demo.sh --workload torch ${flags[*]} --steps $steps"
  tools/demo.sh --workload torch "${flags[@]}" --steps "$steps" --variants "$variants" --out "$out/$m" | tee "$out/$m.log"
done
