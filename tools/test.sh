#!/bin/bash
# The README's test command: installs what is missing (Debian packages), configures and builds
# libhier for Open MPI and for MPICH, and runs every test of both. Exits non-zero on any failure.
#   tools/test.sh [ctest arguments...]      e.g. tools/test.sh -R preload
# Environment: HIER_TEST_MPIS="openmpi mpich" (default both), HIER_TEST_JOBS (default: cores),
#   HIER_TEST_SANITIZERS=0 skips the sanitizer stage that follows the two MPIs: a ThreadSanitizer
#   build (preset tsan, MPICH) of the unit tests and the threads test, and an AddressSanitizer +
#   UndefinedBehaviorSanitizer build (preset asan, Open MPI) of the unit tests, the node2
#   reductions and the threads test. Only the targets those tests need are built; the ctest
#   arguments given to this script do not apply to it (its test selection is in the presets).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# python3-torch: tests/torch and examples/torch_train.py (Debian's PyTorch 1.13; with its dependencies
# about 190 MB of packages, 930 MB installed: about 100 s of apt-get on a 2-core machine with a warm mirror).
packages=(cmake ninja-build ccache g++ gfortran python3 pkg-config
          openmpi-bin libopenmpi-dev mpich libmpich-dev python3-mpi4py python3-torch
          libgtest-dev nlohmann-json3-dev libhwloc-dev libunwind-dev
          iproute2 iperf3 slurmctld slurmd slurm-client)
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
# hipcc (Debian's ROCm 5.2) for the HIP compile checks of the device and quantization kernels (gfx90a, the
# MI250X; target hier_quant_hip_check): best effort, the check is skipped where it cannot be had.
if ! command -v hipcc >/dev/null; then
  echo "== installing hipcc (HIP compile check)"
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends hipcc >/dev/null 2>&1 \
    || { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends hipcc >/dev/null 2>&1; }; } \
    || echo "test.sh: hipcc could not be installed: the HIP compile check is skipped"
fi

# ccache: about 40% of each MPI's build never includes mpi.h (the schedule builders, the model,
# the kernels, the MPI-free unit tests, the CUDA module) and preprocesses to the same text under
# both presets, so the second MPI's build takes those objects from the first's (ccache's
# preprocessor mode leaves -I/-D out of the key). CCACHE_NOHASHDIR: with -g the build folder,
# which differs between the presets, would otherwise be part of the key. A launcher the caller
# set is kept.
if command -v ccache >/dev/null; then
  for lang in C CXX CUDA; do
    var=CMAKE_${lang}_COMPILER_LAUNCHER
    [[ -n ${!var:-} ]] || export "$var=ccache"
  done
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  # Paths below the checkout relative to the build folder in ccache's key: a unity batch
  # (below) is compiled as build/<preset>/.../unity_N_cxx.cxx, which would otherwise differ
  # between the presets and miss even where the batch never includes mpi.h.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
fi
# Tests run as root in CI; both launchers oversubscribe the machine's cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=${HIER_TEST_JOBS:-$(nproc)} mpis=${HIER_TEST_MPIS:-openmpi mpich} sanitizers=${HIER_TEST_SANITIZERS:-1}
# ctest slots: one more than the build's jobs. An MPI test claims at most the cores
# (cmake/HierTesting.cmake, hier_test_ranks), so the extra slot runs a one-slot test beside it:
# mostly tests that wait (the hang cases' watchdog limits, the report checks), which with -j
# equal to the cores could only pair with each other while every MPI test ran alone.
test_jobs=$((jobs + 1))
# Unity builds (CMake batches of a library's or tool's sources, one compiler run each; the test
# programs stay one object per file, tests/CMakeLists.txt): the headers every file of a layer
# includes (the STL, nlohmann/json, MPI) are parsed once a batch, not once a file (bench/RESULTS.md,
# "Session 18 (citime2)"). Only here: a build configured without this script keeps one object per
# file, so that an edit recompiles one file and a file that does not include what it uses still
# fails (-DCMAKE_UNITY_BUILD=OFF turns a build folder this script configured back).
unity=(-DCMAKE_UNITY_BUILD=ON)
# This script's own knobs are not libhier's: the tests must not see them (libhier warns about an
# unknown HIER_* variable, and the preload tests refuse any message on a clean run).
unset HIER_TEST_JOBS HIER_TEST_MPIS HIER_TEST_SANITIZERS
status=0
summary=()
for mpi in $mpis; do
  echo "== $mpi: configure"
  mkdir -p build
  if ! cmake --preset "$mpi" "${unity[@]}" >"build/configure-$mpi.log" 2>&1; then
    cat "build/configure-$mpi.log"; summary+=("$mpi: configure FAILED"); status=1; continue
  fi
  echo "== $mpi: build"
  if ! cmake --build --preset "$mpi" -j "$jobs"; then
    summary+=("$mpi: build FAILED"); status=1; continue
  fi
  echo "== $mpi: test"
  start=$SECONDS
  if ctest --preset "$mpi" -j "$test_jobs" "$@"; then
    summary+=("$mpi: all tests passed ($((SECONDS - start)) s)")
  else
    summary+=("$mpi: tests FAILED ($((SECONDS - start)) s; log: build/$mpi/Testing/Temporary/LastTest.log)"); status=1
  fi
done
# Sanitized builds: libhier.so and the test executables are instrumented (the executables load
# the runtime first); the MPI launchers and libraries are not. Selection and options: the tsan /
# asan test presets in CMakePresets.json; suppressions: tools/sanitizers/.
sanitizer_stage() {
  local preset=$1 dir=build/$1
  echo "== $preset: configure"
  if ! cmake --preset "$preset" "${unity[@]}" >"build/configure-$preset.log" 2>&1; then
    cat "build/configure-$preset.log"; summary+=("$preset: configure FAILED"); status=1; return
  fi
  # The executables of the preset's tests: unit.<target>, mpi.<target>[.<variant>].np<n>
  # (report checks and scripts have no target of their own).
  # hier_test_yield: the MPICH ranks' preload (cmake/HierTesting.cmake), where the build has it.
  local targets=(hier hier-info) name
  for name in hier_test_yield $(ctest --preset "$preset" -N | sed -n 's/^ *Test *#[0-9]*: \(unit\|mpi\)\.\([^.]*\).*/\2/p' | sort -u); do
    ninja -C "$dir" -t query "$name" >/dev/null 2>&1 && targets+=("$name")
  done
  echo "== $preset: build (${targets[*]})"
  local start=$SECONDS
  if ! cmake --build "$dir" -j "$jobs" --target "${targets[@]}"; then
    summary+=("$preset: build FAILED"); status=1; return
  fi
  local built=$((SECONDS - start))
  echo "== $preset: test"
  start=$SECONDS
  if ctest --preset "$preset" -j "$test_jobs"; then
    summary+=("$preset: all tests passed (build ${built} s, tests $((SECONDS - start)) s)")
  else
    summary+=("$preset: tests FAILED ($((SECONDS - start)) s; log: $dir/Testing/Temporary/LastTest.log)"); status=1
  fi
}
if [[ $sanitizers != 0 ]]; then
  sanitizer_stage tsan
  sanitizer_stage asan
fi

echo "== summary"
printf '  %s\n' "${summary[@]}"
exit $status
