#!/bin/bash
# The README's test command: installs what is missing (Debian packages), configures and builds
# libhier for Open MPI and for MPICH, and runs every test of both. Exits non-zero on any failure.
#
# usage: tools/test.sh [ctest arguments...]      e.g. tools/test.sh -R preload
#        tools/test.sh --help                     this text
#
# Environment: HIER_TEST_MPIS="openmpi mpich" (default both), HIER_TEST_JOBS (default: cores),
#   HIER_TEST_SANITIZERS=0 skips the sanitizer stage that follows the two MPIs: a ThreadSanitizer
#   build (preset tsan, MPICH) of the unit tests and the threads test, and an AddressSanitizer +
#   UndefinedBehaviorSanitizer build (preset asan, Open MPI) of the unit tests, the node2
#   reductions and the threads test. Only the targets those tests need are built; the ctest
#   arguments given to this script do not apply to it (its test selection is in the presets).
# Packages, ccache and unity settings: tools/lib/build.sh (shared with tools/demo.sh). The test
# programs keep glibc malloc's pages (cmake/HierTesting.cmake, HIER_TEST_MALLOC; docs/install.md).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source tools/lib/help.sh
hier_help "$@"
source tools/lib/build.sh   # the package lists, ccache and unity settings tools/demo.sh uses too

mpis=${HIER_TEST_MPIS:-openmpi mpich}
hier_install_packages "${hier_build_packages[@]}" $(hier_mpi_packages openmpi) $(hier_mpi_packages mpich) \
  "${hier_test_packages[@]}" || exit 2
hier_install_hipcc
hier_build_env "$root"
# Tests run as root in CI; both launchers oversubscribe the machine's cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=${HIER_TEST_JOBS:-$(nproc)} sanitizers=${HIER_TEST_SANITIZERS:-1}
# ctest slots: one more than the build's jobs. An MPI test claims at most the cores
# (cmake/HierTesting.cmake, hier_test_ranks), so the extra slot runs a one-slot test beside it:
# mostly tests that wait (the hang cases' watchdog limits, the report checks), which with -j
# equal to the cores could only pair with each other while every MPI test ran alone.
test_jobs=$((jobs + 1))
# This script's own knobs are not libhier's: the tests must not see them (libhier warns about an
# unknown HIER_* variable, and the preload tests refuse any message on a clean run).
unset HIER_TEST_JOBS HIER_TEST_MPIS HIER_TEST_SANITIZERS
status=0
summary=()
for mpi in $mpis; do
  echo "== $mpi: configure"
  if ! hier_configure "$mpi"; then summary+=("$mpi: configure FAILED"); status=1; continue; fi
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
  if ! hier_configure "$preset"; then summary+=("$preset: configure FAILED"); status=1; return; fi
  # The executables of the preset's tests: unit.<target>, mpi.<target>[.<variant>].np<n>
  # (report checks and scripts have no target of their own).
  # hier_test_yield: the ranks' preload (cmake/HierTesting.cmake), where the build has it.
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
