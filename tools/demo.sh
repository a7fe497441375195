#!/bin/bash
# The README's main command: libhier accelerating an unmodified training program.
#
# Builds what it runs (installing missing Debian packages first, as tools/test.sh does: the one
# preset --mpi names, targets libhier and train_mlp; no tests), brings up an emulated
# cluster of 2 nodes x 4 ranks joined by 1 Gbit/s links (tools/minicluster), runs the bundled
# data-parallel MLP (examples/train_mlp, gradients summed with MPI_Allreduce) without and with
# libhier preloaded, and prints time per step, the speedup, the bytes that crossed the links and
# both final losses (equal: train_mlp's exact-sum mode makes them independent of reduction
# order). The cluster is torn down at the end, also on failure.
# --launcher mpiexec|srun: srun runs the ranks under Slurm on the emulated cluster (docs/slurm.md).
# Without root it runs on this machine alone with nodes faked by HIER_LEVELS=node:4, and says so.
#
# usage: tools/demo.sh [--mpi openmpi|mpich] [--mode ddp|zero] [--width N] [--steps N] [--reps N]
#                      [--quant int8|int4] [--overlap] [--launcher mpiexec|srun] [--workload mlp|torch]
# --quant: libhier quantizes across nodes (HIER_QUANT, with HIER_QUANT_FEEDBACK=on; lossy, so both
# variants train with --exact-sum 0 and the final losses are compared by their relative difference).
# --overlap: train_mlp --overlap 1 (one MPI_Iallreduce per layer during backward); libhier with its
# default progress (the program's MPI calls), or HIER_PROGRESS as exported by the caller
# (HIER_PROGRESS=thread tools/demo.sh --overlap: on 2 cores shared by 8 ranks the thread took
# more of the computation than it hid, bench/RESULTS.md; docs/nonblocking.md).
# --workload torch: a PyTorch transformer over mpi4py instead (tools/demo_torch.sh, docs/pytorch.md).
set -euo pipefail
source "$(dirname "$0")/lib/help.sh"
hier_help "$@"
workload=mlp
for ((i = 1; i < $#; i++)); do [[ ${!i} == --workload ]] && { j=$((i + 1)); workload=${!j}; }; done
case $workload in
  torch) exec "$(dirname "$0")/demo_torch.sh" "$@";;
  mlp) set -- $(for a in "$@"; do echo "$a"; done | sed '/^--workload$/{N;d}');;
  *) echo "demo.sh: --workload must be mlp or torch" >&2; exit 2;;
esac
cd "$(dirname "$0")/.."
root=$PWD
mpi=openmpi mode=ddp width=2048 steps=8 batch=8 reps=2 quant= overlap=0
while (($#)); do
  case $1 in
    --launcher) launcher=$2; shift 2;;
    --mpi) mpi=$2; shift 2;; --mode) mode=$2; shift 2;; --width) width=$2; shift 2;;
    --steps) steps=$2; shift 2;; --reps) reps=$2; shift 2;; --quant) quant=$2; shift 2;; --overlap) overlap=1; shift;;
    *) echo "demo.sh: unknown option $1 (--mpi, --mode, --width, --steps, --reps, --quant, --overlap)" >&2; exit 2;;
  esac
done
[[ $mpi == openmpi || $mpi == mpich ]] || { echo "demo.sh: --mpi must be openmpi or mpich" >&2; exit 2; }
launcher=${launcher:-mpiexec}
mcname=${MINICLUSTER_NAME:-demo}   # the emulated cluster's name (keep clusters of several users apart)
[[ $launcher == mpiexec || $launcher == srun ]] || { echo "demo.sh: --launcher must be mpiexec or srun" >&2; exit 2; }

# Only what the demo runs: one preset, its targets (tools/lib/build.sh).
source tools/lib/build.sh
demo_packages=("${hier_build_packages[@]}" $(hier_mpi_packages "$mpi"))
[[ $(id -u) -eq 0 ]] && demo_packages+=(iproute2)   # the emulated cluster (below)
[[ $launcher == srun ]] && demo_packages+=(slurmctld slurmd slurm-client)
hier_install_packages "${demo_packages[@]}" || exit 2
hier_build_env "$root"
hier_build_targets "$mpi" hier train_mlp || exit 1
lib=$root/build/$mpi/libhier.so
prog=$root/build/$mpi/examples/train_mlp
args=(--mode "$mode" --width "$width" --steps "$steps" --batch "$batch" --print-every 0 --overlap "$overlap")
if [[ -n $quant ]]; then  # only the preloaded libhier reads these
  [[ $quant == int8 || $quant == int4 ]] || { echo "demo.sh: --quant must be int8 or int4" >&2; exit 2; }
  export HIER_QUANT=$quant HIER_QUANT_FEEDBACK=on
  args+=(--exact-sum 0)
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset HIER_DISABLE

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

cluster=0
if [[ $(id -u) -eq 0 ]] && ip netns list >/dev/null 2>&1; then cluster=1; fi

declare -A step_ms comm_ms loss sent
if ((cluster)); then
  echo "== emulated cluster: 2 nodes x 4 ranks, 1 Gbit/s links ($mpi, launcher $launcher)"
  slurm=(); [[ $launcher == srun ]] && slurm=(--slurm)
  trap 'tools/minicluster --name "$mcname" down >/dev/null 2>&1 || true' EXIT INT TERM
  tools/minicluster --name "$mcname" down >/dev/null 2>&1 || true
  tools/minicluster --name "$mcname" up --nodes 2 --ppn 4 --link 1gbit "${slurm[@]}" >/dev/null
  run() {  # variant -> prints the program's final line
    local pre=() out
    [[ $1 == libhier ]] && pre=(--preload "$lib")
    # MPICH 4.0.2 over UCX/TCP can hang in MPI_Finalize after the work is done (openucx/ucx#8738,
    # docs/minicluster.md): a run that printed its final line and then hangs still counts, and
    # is ended 10 s after train_mlp's --done file appears instead of at the timeout.
    local done_file; done_file=$(mktemp -u /tmp/demo-done.XXXXXX)
    out=$(tools/minicluster --name "$mcname" run --mpi "$mpi" --launcher "$launcher" --timeout 120 --done-file "$done_file" "${pre[@]}" -- "$prog" "${args[@]}" --done "$done_file" 2>/dev/null || true)
    rm -f "$done_file"
    grep final_loss <<<"$out" | tail -1 || true  # no line: the caller reports the failed run
  }
  tools/minicluster --name "$mcname" run --mpi "$mpi" --launcher "$launcher" --timeout 60 -- "$prog" --steps 2 --width 256 --print-every 0 >/dev/null 2>&1 || true  # warm-up
else
  echo "== not root: one machine, nodes faked with HIER_LEVELS=node:4 (8 ranks; no real links)"
  export HIER_LEVELS=node:4
  run() {
    local flag=() out
    if [[ $mpi == openmpi ]]; then flag=(--oversubscribe -x "LD_PRELOAD=$([[ $1 == libhier ]] && echo "$lib")");
    else flag=(-genv LD_PRELOAD "$([[ $1 == libhier ]] && echo "$lib")"); fi
    out=$(timeout 300 "mpiexec.$mpi" "${flag[@]}" -n 8 "$prog" "${args[@]}" 2>/dev/null || true)
    grep final_loss <<<"$out" | tail -1 || true  # no line: the caller reports the failed run
  }
fi

declare -A wait_ms
for variant in mpi libhier; do step_ms[$variant]=""; comm_ms[$variant]=""; wait_ms[$variant]=""; sent[$variant]=""; done
dropped_total=0
# Link counters of the demo cluster: total bytes sent and packets dropped, as "bytes drops".
counters() {
  tools/minicluster --name "$mcname" links --json | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["total_sent_bytes"], j["total_dropped"])'
}
for rep in $(seq 1 "$reps"); do
  for variant in mpi libhier; do  # alternate: the machine's load changes over time
    before=0 drops_before=0
    ((cluster)) && read -r before drops_before < <(counters)
    line=$(run "$variant")
    [[ -n $line ]] || { echo "demo.sh: the $variant run failed (no final_loss line)" >&2; exit 1; }
    after=0 drops_after=0
    ((cluster)) && read -r after drops_after < <(counters)
    dropped_total=$((dropped_total + drops_after - drops_before))
    step_ms[$variant]+=" $(field mean_step_ms "$line")"
    comm_ms[$variant]+=" $(field mean_comm_ms "$line")"
    wait_ms[$variant]+=" $(field mean_arrival_wait_ms "$line")"
    sent[$variant]+=" $((after - before))"
    loss[$variant]=$(field final_loss "$line")
    echo "   rep $rep, $variant: $line"
  done
done

ms_mpi=$(median ${step_ms[mpi]}); ms_hier=$(median ${step_ms[libhier]})
# The step also holds the computation, which no collective shortens: the communication per step
# (train_mlp's time inside its gradient collectives) is what libhier changes.
comm_mpi=$(median ${comm_ms[mpi]}); comm_hier=$(median ${comm_ms[libhier]})
echo
echo "== train_mlp --mode $mode --width $width ($mpi, $reps runs each, medians)"
printf '%-28s %14s %14s\n' "" "MPI alone" "with libhier"
printf '%-28s %14.1f %14.1f\n' "time per step (ms)" "$ms_mpi" "$ms_hier"
printf '%-28s %14.1f %14.1f\n' "communication per step (ms)" "$comm_mpi" "$comm_hier"
# Of which rank 0 waited for the slowest rank's computation: no collective can shorten it.
printf '%-28s %14.1f %14.1f\n' "  of it, arrival wait (ms)" "$(median ${wait_ms[mpi]})" "$(median ${wait_ms[libhier]})"
if ((cluster)); then
  printf '%-28s %14.1f %14.1f\n' "MiB over the links per run" "$(awk -v b="$(median ${sent[mpi]})" 'BEGIN{print b/1048576}')" "$(awk -v b="$(median ${sent[libhier]})" 'BEGIN{print b/1048576}')"
fi
printf '%-28s %14s %14s\n' "final loss" "${loss[mpi]}" "${loss[libhier]}"
if ((cluster)); then
  echo "packets dropped on the links during the runs: $dropped_total"
  ((dropped_total == 0)) || echo "WARNING: PACKETS WERE DROPPED: the timings above include TCP retransmission timeouts" >&2
fi
printf 'speedup: %.2fx per step, %.2fx in communication\n' "$(awk -v a="$ms_mpi" -v b="$ms_hier" 'BEGIN{print a/b}')" \
  "$(awk -v a="$comm_mpi" -v b="$comm_hier" 'BEGIN{print (b > 0 ? a/b : 0)}')"
if [[ -n $quant ]]; then
  awk -v a="${loss[mpi]}" -v b="${loss[libhier]}" -v q="$quant" 'BEGIN{printf "final loss with %s + error feedback: %+.3f%% of the exact run'"'"'s\n", q, (b-a)/a*100}'
elif [[ ${loss[mpi]} == "${loss[libhier]}" ]]; then echo "final losses are identical"; else echo "FINAL LOSSES DIFFER"; exit 1; fi
