#!/bin/bash
# tools/demo.sh --workload torch: a PyTorch transformer (examples/torch_train.py, mpi4py) on the
# emulated 2 x 4 cluster in four variants: the MPI alone, libhier exact, libhier HIER_QUANT=int8
# and int4 (both with HIER_QUANT_FEEDBACK=on). Prints per variant the time per step, the
# communication per step, the bytes over the links and the final loss (mean of the last 20 steps),
# and writes torch-demo.png (loss against step, communication per step beside it) and
# torch-demo.json (every variant's per-step loss, step and communication times).
#
# usage: tools/demo.sh --workload torch [--mode ddp|zero] [--overlap] [--steps N] [--out DIR]
#                                       [--model 'torch_train.py options'] [--variants 'mpi exact int8 int4']
# Open MPI only (Debian's python3-mpi4py is built against Open MPI). --overlap: one Iallreduce per
# bucket from backward hooks (1 MiB buckets, so that there is more than one); libhier with its
# default progress, or HIER_PROGRESS as exported by the caller (as tools/demo.sh). Without root
# (no emulated cluster) the ranks run on this machine with HIER_LEVELS=node:4 and no links are
# counted. Like tools/demo.sh it installs what is missing
# and builds only the openmpi preset's libhier.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source tools/lib/help.sh
hier_help "$@"
mode=ddp overlap=0 steps=60 out=$root model= variants="mpi exact int8 int4"
while (($#)); do
  case $1 in
    --workload) shift 2;;
    --mode) mode=$2; shift 2;; --overlap) overlap=1; shift;; --steps) steps=$2; shift 2;;
    --out) out=$2; shift 2;; --model) model=$2; shift 2;; --variants) variants=$2; shift 2;;
    --mpi) [[ $2 == openmpi ]] || { echo "demo.sh --workload torch: Open MPI only (Debian's mpi4py)" >&2; exit 2; }; shift 2;;
    *) echo "demo.sh --workload torch: unknown option $1 (--mode, --overlap, --steps, --out, --model, --variants)" >&2; exit 2;;
  esac
done
[[ $mode == ddp || $mode == zero ]] || { echo "demo.sh: --mode must be ddp or zero" >&2; exit 2; }
((overlap)) && [[ $mode != ddp ]] && { echo "demo.sh: --overlap goes with --mode ddp" >&2; exit 2; }
((steps >= 2)) || { echo "demo.sh: --steps must be at least 2" >&2; exit 2; }
py=/usr/bin/python3
# Only what the demo runs: one preset, libhier (tools/lib/build.sh).
source tools/lib/build.sh
demo_packages=("${hier_build_packages[@]}" $(hier_mpi_packages openmpi) python3-torch python3-mpi4py python3-matplotlib)
[[ $(id -u) -eq 0 ]] && demo_packages+=(iproute2)   # the emulated cluster (below)
hier_install_packages "${demo_packages[@]}" || exit 2
hier_build_env "$root"
hier_build_targets openmpi hier || exit 1
lib=$root/build/openmpi/libhier.so
prog=$root/examples/torch_train.py
args=(--mode "$mode" --steps "$steps" --print-every 0)
((overlap)) && args+=(--overlap --bucket-mib 1)
# shellcheck disable=SC2206
[[ -n $model ]] && args+=($model)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
progress=${HIER_PROGRESS:-}  # the caller's choice, for libhier's variants only
unset HIER_DISABLE HIER_QUANT HIER_QUANT_FEEDBACK HIER_PROGRESS
mcname=${MINICLUSTER_NAME:-demo}
work=$(mktemp -d /tmp/torch-demo.XXXXXX)

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2" | tail -1; }
variant_env() {  # variant -> HIER_* assignments for env
  case $1 in
    mpi|exact) ;;
    int8|int4) echo "HIER_QUANT=$1 HIER_QUANT_FEEDBACK=on";;
  esac
  [[ $1 != mpi && -n $progress ]] && echo "HIER_PROGRESS=$progress"
  return 0
}

cluster=0
if [[ $(id -u) -eq 0 ]] && ip netns list >/dev/null 2>&1; then cluster=1; fi
if ((cluster)); then
  echo "== emulated cluster: 2 nodes x 4 ranks, 1 Gbit/s links (Open MPI)"
  trap 'tools/minicluster --name "$mcname" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT INT TERM
  tools/minicluster --name "$mcname" down >/dev/null 2>&1 || true
  tools/minicluster --name "$mcname" up --nodes 2 --ppn 4 --link 1gbit >/dev/null
  run() {  # variant loss-file -> the program's final line
    local pre=() done_file; done_file=$(mktemp -u /tmp/demo-done.XXXXXX)
    [[ $1 != mpi ]] && pre=(--preload "$lib")
    # shellcheck disable=SC2046
    env $(variant_env "$1") tools/minicluster --name "$mcname" run --mpi openmpi --timeout $((60 + steps * 20)) \
      --done-file "$done_file" "${pre[@]}" -- "$py" "$prog" "${args[@]}" --loss-file "$2" --done "$done_file" 2>"$work/$1.err" \
      | grep final_loss | tail -1 || true
    rm -f "$done_file"
  }
  counters() { tools/minicluster --name "$mcname" links --json | $py -c 'import json,sys; j=json.load(sys.stdin); print(j["total_sent_bytes"], j["total_dropped"])'; }
else
  echo "== not root: one machine, nodes faked with HIER_LEVELS=node:4 (8 ranks; no real links)"
  trap 'rm -rf "$work"' EXIT INT TERM
  export HIER_LEVELS=node:4
  run() {
    local p=""; [[ $1 != mpi ]] && p=$lib
    # shellcheck disable=SC2046
    env $(variant_env "$1") timeout $((60 + steps * 20)) mpiexec.openmpi --oversubscribe --bind-to none -x "LD_PRELOAD=$p" \
      -x HIER_LEVELS $(for v in $(variant_env "$1"); do echo "-x ${v%%=*}"; done) -n 8 "$py" "$prog" "${args[@]}" \
      --loss-file "$2" 2>"$work/$1.err" | grep final_loss | tail -1 || true
  }
  counters() { echo 0 0; }
fi

declare -A line sent
drops=0
for v in $variants; do
  read -r b0 d0 < <(counters)
  l=$(run "$v" "$work/$v.json")
  [[ -n $l ]] || { echo "demo.sh: the $v run failed (no final_loss line):" >&2; tail -5 "$work/$v.err" >&2; exit 1; }
  read -r b1 d1 < <(counters)
  line[$v]=$l sent[$v]=$((b1 - b0)) drops=$((drops + d1 - d0))
  echo "   $v: $l"
done

ov=; ((overlap)) && ov=" --overlap"
title="torch_train --mode $mode$ov --steps $steps (8 ranks, 2 x 4, Open MPI)"
echo
echo "== $title"
printf '%-30s' ""; for v in $variants; do printf '%14s' "$v"; done; echo
printf '%-30s' "time per step (ms)"; for v in $variants; do printf '%14.1f' "$(field mean_step_ms "${line[$v]}")"; done; echo
printf '%-30s' "communication per step (ms)"; for v in $variants; do printf '%14.1f' "$(field mean_comm_ms "${line[$v]}")"; done; echo
printf '%-30s' "  of it, arrival wait (ms)"; for v in $variants; do printf '%14.1f' "$(field mean_arrival_wait_ms "${line[$v]}")"; done; echo
if ((cluster)); then
  printf '%-30s' "MiB over the links per run"; for v in $variants; do printf '%14.1f' "$(awk -v b="${sent[$v]}" 'BEGIN{print b/1048576}')"; done; echo
fi
printf '%-30s' "final loss (last 20 steps)"; for v in $variants; do printf '%14s' "$(field final_loss "${line[$v]}")"; done; echo
if ((cluster)); then
  echo "packets dropped on the links during the runs: $drops"
  ((drops == 0)) || echo "WARNING: PACKETS WERE DROPPED: the timings above include TCP retransmission timeouts" >&2
fi

# Per-step comparison with the MPI alone, and the picture.
$py - "$work" "$out/torch-demo.png" "$title" $variants <<'EOF'
import json, sys
work, png, title, variants = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = {v: json.load(open(f"{work}/{v}.json")) for v in variants}
base = "mpi" if "mpi" in runs else "exact" if "exact" in runs else None
if base:
    ref = runs[base]["loss"]
    for v in variants:
        if v == base:
            continue
        rel = max(abs(a - b) / abs(b) for a, b in zip(runs[v]["loss"], ref))
        fin = lambda r: sum(r[-20:]) / len(r[-20:])
        print(f"{v:>6}: final loss {(fin(runs[v]['loss']) - fin(ref)) / fin(ref) * 100:+.3f}% of the {base} run's;"
              f" largest per-step loss difference {rel:.2e} (relative)"
              + (" (bit-identical losses)" if runs[v]["loss"] == ref else ""))
with open(png[:-4] + ".json", "w") as f:  # every step's figures, for a later look
    json.dump(runs, f)
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [2, 1]})
labels = {"mpi": "MPI alone", "exact": "libhier exact", "int8": "libhier int8 + feedback",
          "int4": "libhier int4 + feedback"}
styles = {"mpi": dict(lw=2.5, color="0.6"), "exact": dict(lw=1.2, color="C0", ls="--"),
          "int8": dict(lw=1, color="C1"), "int4": dict(lw=1, color="C3")}
for v in variants:
    loss = runs[v]["loss"]
    a.plot(range(1, len(loss) + 1), loss, label=labels.get(v, v), **styles.get(v, {}))
a.set_xlabel("step"); a.set_ylabel("training loss (mean over ranks, nats/byte)")
a.set_title(title, fontsize=9); a.grid(alpha=0.3); a.legend()
comm = [sum(runs[v]["comm_ms"][1:]) / max(1, len(runs[v]["comm_ms"]) - 1) for v in variants]
step = [sum(runs[v]["step_ms"][1:]) / max(1, len(runs[v]["step_ms"]) - 1) for v in variants]
x = range(len(variants))
b.bar(x, step, color="0.85", label="step")
b.bar(x, comm, color=[styles.get(v, {}).get("color", "C2") for v in variants], label="communication")
for i, c in enumerate(comm):
    b.text(i, c, f"{c:.0f}", ha="center", va="bottom", fontsize=9)
b.set_xticks(list(x)); b.set_xticklabels([labels.get(v, v).replace("libhier ", "").replace(" + feedback", "\n+fb") for v in variants], fontsize=8)
b.set_ylabel("ms per step (mean of steps 2..N, rank 0)"); b.set_title("communication per step (inside the step)", fontsize=9)
b.legend(fontsize=8); b.grid(axis="y", alpha=0.3)
fig.tight_layout(); fig.savefig(png, dpi=110)
print(f"wrote {png}")
EOF
