#!/bin/bash
# Installs the libhier .deb on this machine with dpkg, checks it as a user meets it, and removes
# it again, leaving nothing behind:
#   - hier-info-openmpi and hier-info-mpich run,
#   - pkg-config finds hier-openmpi and hier-mpich,
#   - for each MPI, a small unmodified MPI program (compiled here with that MPI's mpicc) runs
#     under 'hier-run mpiexec.<mpi> -n 2 ./prog': hier-run picks the matching build from the
#     program's ELF dependencies, and each rank's libhier report says which MPI it was built for
#     and that MPI_Allreduce went through it (and the program checks its own sum),
#   - dpkg --purge removes every file 'dpkg -L libhier' listed.
#
# usage: tools/check-deb.sh [DEB]        (default: the newest build/deb/libhier_*.deb)
#
# Root only (dpkg). Refuses to run where a libhier package is already installed (never touches
# a user's install). The package is removed on any exit (trap). Not part of ctest/CI: it changes
# the machine's package database and /usr while other tests run; the install layout itself is
# tested in CI by tests/install (the same install rules CPack runs).
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/lib/help.sh
hier_help "$@"
deb=${1:-$(ls -t build/deb/libhier_*.deb 2>/dev/null | head -1)}
fail() { echo "FAIL: $*"; exit 1; }
[[ -n $deb && -f $deb ]] || { echo "check-deb.sh: no .deb given or found in build/deb (run tools/build-deb.sh)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "check-deb.sh: needs root (dpkg -i)" >&2; exit 2; }
if dpkg-query -W -f='${Status}' libhier 2>/dev/null | grep -q installed; then
  echo "check-deb.sh: a libhier package is installed already; not touching it (dpkg -r libhier first)" >&2; exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(compgen -e | grep '^HIER_'); do unset "$v"; done
unset LD_PRELOAD
work=$(mktemp -d /tmp/hier-deb.XXXXXX)
installed=0
cleanup() {
  ((installed)) && dpkg --purge libhier >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "== dpkg -i $deb"
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; installed=1; fail "dpkg -i failed (missing dependencies? apt-get install ./$deb installs them)"; }
installed=1
dpkg -L libhier | while read -r f; do [[ -f $f ]] && echo "$f"; done >"$work/files"
echo "   $(wc -l <"$work/files") files installed"

for mpi in openmpi mpich; do
  lib=$(grep "/hier/$mpi/libhier.so\$" "$work/files") || fail "no libhier.so for $mpi in the package"
  out=$(timeout 120 "hier-info-$mpi" 2>&1) || fail "hier-info-$mpi failed: $out"
  echo "   hier-info-$mpi: $(head -1 <<<"$out")"
  pkg-config --exists "hier-$mpi" || fail "pkg-config does not find hier-$mpi"
  cat >"$work/allreduce.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  static int s[1 << 16], r[1 << 16];
  int rank, size, bad = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 0; i < 1 << 16; ++i) s[i] = rank + i;
  MPI_Allreduce(s, r, 1 << 16, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < 1 << 16; ++i) bad += r[i] != size * i + size * (size - 1) / 2;
  printf("rank %d: %s\n", rank, bad ? "WRONG" : "ok");
  MPI_Finalize();
  return bad != 0;
}
C
  "mpicc.$mpi" -O1 -o "$work/allreduce-$mpi" "$work/allreduce.c" || fail "mpicc.$mpi failed"
  flags=(); [[ $mpi == openmpi ]] && flags=(--oversubscribe)
  out=$(HIER_REPORT="$work/$mpi.%r.json" timeout 120 hier-run "mpiexec.$mpi" "${flags[@]}" -n 2 "$work/allreduce-$mpi" 2>&1) \
    || fail "hier-run mpiexec.$mpi: $out"
  [[ $(grep -c ': ok$' <<<"$out") == 2 ]] || fail "hier-run mpiexec.$mpi: expected 2 ranks ok: $out"
  /usr/bin/python3 - "$work" "$mpi" <<'PY' || fail "$mpi: reports"
import glob, json, sys
work, mpi = sys.argv[1:]
name = {"openmpi": "Open MPI", "mpich": "MPICH"}[mpi]
files = sorted(glob.glob(f"{work}/{mpi}.*.json"))
assert len(files) == 2, f"{len(files)} reports: libhier not preloaded by hier-run on every rank"
for f in files:
    r = json.load(open(f))
    assert r["libhier"]["built_for"] == name, r["libhier"]
    assert r["functions"]["MPI_Allreduce"]["calls"] == 1, r["functions"].get("MPI_Allreduce")
print(f"   hier-run mpiexec.{mpi} -n 2: sums ok, reports of libhier for {name} on both ranks")
PY
done

echo "== dpkg --purge libhier"
dpkg --purge libhier >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge failed"; }
installed=0
left=$(while read -r f; do [[ -e $f ]] && echo "$f"; done <"$work/files")
[[ -z $left ]] || fail "left behind after purge: $left"
for d in /usr/lib/hier /usr/share/libhier /usr/share/doc/libhier /usr/lib/cmake/hier; do
  [[ ! -e $d ]] || fail "left behind after purge: $d"
done
dpkg-query -W libhier >/dev/null 2>&1 && fail "dpkg still lists libhier"
echo "PASS: installed, ran under both MPIs, removed without a trace"
