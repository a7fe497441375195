#!/bin/bash
# The README's test command: installs what is missing (Debian packages), configures and builds
# libhier for Open MPI and for MPICH, and runs every test of both. Exits non-zero on any failure.
#   tools/test.sh [ctest arguments...]      e.g. tools/test.sh -R preload
# Environment: HIER_TEST_MPIS="openmpi mpich" (default both), HIER_TEST_JOBS (default: cores).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

packages=(cmake ninja-build g++ gfortran python3 pkg-config
          openmpi-bin libopenmpi-dev mpich libmpich-dev python3-mpi4py
          libgtest-dev nlohmann-json3-dev libhwloc-dev libunwind-dev
          iproute2 iperf3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { echo "test.sh: apt-get install failed for: ${missing[*]}" >&2; exit 2; }
fi

# Tests run as root in CI; both launchers oversubscribe the machine's cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=${HIER_TEST_JOBS:-$(nproc)}
status=0
summary=()
for mpi in ${HIER_TEST_MPIS:-openmpi mpich}; do
  echo "== $mpi: configure"
  mkdir -p build
  if ! cmake --preset "$mpi" >"build/configure-$mpi.log" 2>&1; then
    cat "build/configure-$mpi.log"; summary+=("$mpi: configure FAILED"); status=1; continue
  fi
  echo "== $mpi: build"
  if ! cmake --build --preset "$mpi" -j "$jobs"; then
    summary+=("$mpi: build FAILED"); status=1; continue
  fi
  echo "== $mpi: test"
  start=$SECONDS
  if ctest --preset "$mpi" -j "$jobs" "$@"; then
    summary+=("$mpi: all tests passed ($((SECONDS - start)) s)")
  else
    summary+=("$mpi: tests FAILED ($((SECONDS - start)) s; log: build/$mpi/Testing/Temporary/LastTest.log)"); status=1
  fi
done
echo "== summary"
printf '  %s\n' "${summary[@]}"
exit $status
