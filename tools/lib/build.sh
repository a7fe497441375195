# Sourced by tools/test.sh and tools/demo.sh (demo_torch.sh): the Debian packages libhier needs,
# their installation, and the build settings both scripts use. Defines functions and arrays only.

# What configuring and building any preset needs (CMakeLists.txt: C, C++ and Fortran, MPI,
# GoogleTest, nlohmann_json; hwloc and libunwind where found).
hier_build_packages=(cmake ninja-build ccache g++ gfortran python3 pkg-config
                     libgtest-dev nlohmann-json3-dev libhwloc-dev libunwind-dev)
# What the whole test suite needs besides: python3-mpi4py and python3-torch for tests/torch and
# examples/torch_train.py (Debian's PyTorch 1.13; with its dependencies about 190 MB of packages,
# 930 MB installed: about 100 s of apt-get on a 2-core machine with a warm mirror); iproute2 and
# iperf3 for the emulated cluster (tools/minicluster); Slurm for its srun tests.
hier_test_packages=(python3-mpi4py python3-torch iproute2 iperf3 slurmctld slurmd slurm-client)

# hier_mpi_packages MPI: the packages of one MPI family (runtime and headers).
hier_mpi_packages() {
  case $1 in
    openmpi) echo openmpi-bin libopenmpi-dev;;
    mpich) echo mpich libmpich-dev;;
  esac
}

hier_sudo() { if [[ $(id -u) -ne 0 ]]; then sudo "$@"; else "$@"; fi; }

# hier_install_packages PKG...: installs those not installed yet with apt-get; returns 2 with one
# line naming them when that fails.
hier_install_packages() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "== installing: ${missing[*]}"
  { hier_sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive hier_sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
    { echo "$(basename "$0"): apt-get install failed for: ${missing[*]}" >&2; return 2; }
}

# hier_install_hipcc: hipcc (Debian's ROCm 5.2) for the HIP compile checks of the device and
# quantization kernels (gfx90a, the MI250X; target hier_quant_hip_check): best effort, the check
# is skipped where it cannot be had.
hier_install_hipcc() {
  command -v hipcc >/dev/null && return 0
  echo "== installing hipcc (HIP compile check)"
  { DEBIAN_FRONTEND=noninteractive hier_sudo apt-get install -y -qq --no-install-recommends hipcc >/dev/null 2>&1 ||
    { hier_sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive hier_sudo apt-get install -y -qq --no-install-recommends hipcc >/dev/null 2>&1; }; } ||
    echo "$(basename "$0"): hipcc could not be installed: the HIP compile check is skipped"
}

# hier_build_env ROOT: ccache for the compilers. About 40% of each MPI's build never includes
# mpi.h (the schedule builders, the model, the kernels, the MPI-free unit tests, the CUDA module)
# and preprocesses to the same text under both presets, so the second MPI's build takes those
# objects from the first's (ccache's preprocessor mode leaves -I/-D out of the key).
# CCACHE_NOHASHDIR: with -g the build folder, which differs between the presets, would otherwise
# be part of the key. CCACHE_BASEDIR: paths below the checkout relative to the build folder in
# ccache's key, so that a unity batch (below), compiled as build/<preset>/.../unity_N_cxx.cxx,
# does not differ between the presets and miss even where the batch never includes mpi.h.
# A launcher the caller set is kept.
hier_build_env() {
  command -v ccache >/dev/null || return 0
  local lang var
  for lang in C CXX CUDA; do
    var=CMAKE_${lang}_COMPILER_LAUNCHER
    [[ -n ${!var:-} ]] || export "$var=ccache"
  done
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$1}
}

# Unity builds (CMake batches of a library's or tool's sources, one compiler run each; the test
# programs stay one object per file, tests/CMakeLists.txt): the headers every file of a layer
# includes (the STL, nlohmann/json, MPI) are parsed once a batch, not once a file (bench/RESULTS.md,
# "Session 18 (citime2)"). Only in the scripts: a build configured without them keeps one object
# per file, so that an edit recompiles one file and a file that does not include what it uses
# still fails (-DCMAKE_UNITY_BUILD=OFF turns a build folder these scripts configured back).
hier_unity=(-DCMAKE_UNITY_BUILD=ON)

# hier_configure PRESET: cmake --preset PRESET with the unity setting, its output in
# build/configure-PRESET.log (printed when it fails).
hier_configure() {
  mkdir -p build
  cmake --preset "$1" "${hier_unity[@]}" >"build/configure-$1.log" 2>&1 || { cat "build/configure-$1.log"; return 1; }
}

# hier_build_targets PRESET TARGET...: configures PRESET where it is not configured yet and builds
# only TARGET... (the demos: a fresh clone builds one preset, no tests; a no-op when up to date).
# The build's output goes to build/build-PRESET-targets.log, its tail to stderr when it fails.
hier_build_targets() {
  local preset=$1; shift
  if [[ ! -f build/$preset/build.ninja ]]; then
    echo "== configuring libhier (preset $preset)"
    hier_configure "$preset" >&2 || { echo "$(basename "$0"): cmake --preset $preset failed (log above)" >&2; return 1; }
  fi
  echo "== building $* (preset $preset)"
  local log=build/build-$preset-targets.log
  cmake --build --preset "$preset" --target "$@" >"$log" 2>&1 ||
    { tail -40 "$log" >&2; echo "$(basename "$0"): build failed (log: $log)" >&2; return 1; }
}
