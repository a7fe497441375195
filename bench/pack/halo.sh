#!/bin/bash
# 3D halo exchange (bench_halo: 26 neighbours, subarray types, Isend/Irecv/Waitall) with the MPI
# alone (libhier preloaded with HIER_DISABLE=1) and with libhier, run alternately, both MPIs.
# usage: bench/pack/halo.sh [--mpi openmpi|mpich|both] [--np P] [--n N] [--ghost G] [--iters I] [--rounds R]
#                           [--single-copy none|cma|knem|xpmem] [--dirs all|xrows|others] [--control]
# Defaults: both MPIs, 8 ranks (2x2x2), 64^3 doubles per rank, 2 ghost layers, 50 iterations,
# 5 rounds, all 26 directions (--dirs xrows: only the 10 messages of G-double rows along x, the x
# faces and 8 edges that libhier packs under Open MPI; --dirs others: the other 16). Each round runs the two variants back to back (the order alternates between rounds);
# each run prints the median over its iterations of the slowest rank's exchange time. The
# summary per MPI is the median over rounds of each variant and their ratio (> 1: libhier is
# faster). Extra HIER_* variables in the environment (HIER_TUNE_FILE) reach the libhier runs.
# Open MPI runs with --oversubscribe --bind-to none and btl_vader_single_copy_mechanism=none
# (as the tests: CMA needs ptrace rights that containers often lack); --single-copy cma lets
# large contiguous messages, libhier's packed ones included, use one copy where it works.
# --control adds a third variant to every round: libhier preloaded and active but never packing
# (HIER_TUNE_FILE=tests/dtype/data/never_pack.json), which moves exactly the bytes the MPI alone
# moves: its ratio to the MPI alone is the noise floor of the run (and libhier's interposition
# cost). Besides the medians, the summary gives the median of the per-round ratios (each round's
# variants ran back to back, so a ratio within a round is less exposed to load that comes and
# goes) and in how many rounds libhier was faster.
# Needs build/<mpi>/ (cmake --preset <mpi> && cmake --build --preset <mpi>).
source "$(dirname "$0")/../../tools/lib/help.sh"
hier_help "$@"
set -euo pipefail
cd "$(dirname "$0")/../.."
mpis=(openmpi mpich) np=8 n=64 ghost=2 iters=50 rounds=5 single_copy=none dirs=all control=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --mpi) [[ $2 == both ]] && mpis=(openmpi mpich) || mpis=("$2"); shift 2 ;;
    --np) np=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    --ghost) ghost=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --single-copy) single_copy=$2; shift 2 ;;
    --dirs) dirs=$2; shift 2 ;;
    --control) control=1; shift ;;
    *) echo "halo.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# run MPI DISABLE [TUNE_FILE]: one bench_halo run; prints its median in microseconds (fails if invalid).
run() {
  local mpi=$1 disable=$2 tune=${3:-${HIER_TUNE_FILE:-}} b=build/$1 out
  local lib=$PWD/$b/libhier.so
  local env=(LD_PRELOAD "$lib" HIER_DISABLE "$disable")
  [[ -n $tune ]] && env+=(HIER_TUNE_FILE "$tune")
  local flags=()
  if [[ $mpi == openmpi ]]; then
    flags=(--oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism "$single_copy")
    for ((k = 0; k < ${#env[@]}; k += 2)); do flags+=(-x "${env[k]}=${env[k + 1]}"); done
  else
    for ((k = 0; k < ${#env[@]}; k += 2)); do flags+=(-genv "${env[k]}" "${env[k + 1]}"); done
  fi
  out=$(timeout 600 "mpiexec.$mpi" "${flags[@]}" -n "$np" "$b/bench/pack/bench_halo" \
        --n "$n" --ghost "$ghost" --iters "$iters" --warmup 5 --dirs "$dirs") || { echo "$out" >&2; return 1; }
  grep -q 'valid=1' <<<"$out" || { echo "$out" >&2; return 1; }
  # "median|what was run" (the description without the variant)
  echo "$(sed -n 's/^RESULT median_us=\([0-9.]*\).*/\1/p' <<<"$out")|$(sed -n 's/^\(MPI: .*\)/\1/p; s/^halo: \(.*\), \(MPI alone\|libhier\)$/\1/p' <<<"$out" | paste -sd ';')"
}

for mpi in "${mpis[@]}"; do
  [[ -x build/$mpi/bench/pack/bench_halo && -f build/$mpi/libhier.so ]] || { echo "skip $mpi: build/$mpi not built"; continue; }
  alone=() lib=() ctl=() rl=() rc=()
  never=$PWD/tests/dtype/data/never_pack.json
  for ((r = 1; r <= rounds; ++r)); do
    c=
    case $(( (r - 1) % 2 + 2 * control )) in  # the order alternates (with --control: rotates)
      0) a=$(run "$mpi" 1); l=$(run "$mpi" 0) ;;
      1) l=$(run "$mpi" 0); a=$(run "$mpi" 1) ;;
      *) case $(( (r - 1) % 3 )) in
           0) a=$(run "$mpi" 1); l=$(run "$mpi" 0); c=$(run "$mpi" 0 "$never") ;;
           1) l=$(run "$mpi" 0); c=$(run "$mpi" 0 "$never"); a=$(run "$mpi" 1) ;;
           2) c=$(run "$mpi" 0 "$never"); a=$(run "$mpi" 1); l=$(run "$mpi" 0) ;;
         esac ;;
    esac
    ((r > 1)) || echo "== ${a#*|}" | sed 's/;/\n   /'
    a=${a%%|*} l=${l%%|*} c=${c%%|*}
    alone+=("$a") lib+=("$l") rl+=("$(awk -v a="$a" -v l="$l" 'BEGIN {print a / l}')")
    if ((control)); then
      ctl+=("$c") rc+=("$(awk -v a="$a" -v c="$c" 'BEGIN {print a / c}')")
      printf 'round %d: MPI alone %10.1f us   libhier %10.1f us   libhier never packing %10.1f us\n' "$r" "$a" "$l" "$c"
    else
      printf 'round %d: MPI alone %10.1f us   libhier %10.1f us\n' "$r" "$a" "$l"
    fi
  done
  ma=$(printf '%s\n' "${alone[@]}" | median)
  ml=$(printf '%s\n' "${lib[@]}" | median)
  printf '%s: median of %d rounds: MPI alone %.1f us, libhier %.1f us, MPI alone / libhier = %.2f\n' \
    "$mpi" "$rounds" "$ma" "$ml" "$(awk -v a="$ma" -v l="$ml" 'BEGIN {print a / l}')"
  wins=$(printf '%s\n' "${rl[@]}" | awk '$1 > 1 {n++} END {print n + 0}')
  printf '%s: per-round MPI alone / libhier: median %.2f, libhier faster in %d of %d rounds\n' \
    "$mpi" "$(printf '%s\n' "${rl[@]}" | median)" "$wins" "$rounds"
  if ((control)); then
    mc=$(printf '%s\n' "${ctl[@]}" | median)
    wins=$(printf '%s\n' "${rc[@]}" | awk '$1 > 1 {n++} END {print n + 0}')
    printf '%s: control (libhier never packing) %.1f us; per-round MPI alone / control: median %.2f, control faster in %d of %d rounds\n' \
      "$mpi" "$mc" "$(printf '%s\n' "${rc[@]}" | median)" "$wins" "$rounds"
  fi
done
