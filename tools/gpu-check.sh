#!/usr/bin/env bash
# The GPU check (issues 25 and 36) on a machine with an NVIDIA GPU, in one script that runs in
# under 9 minutes (docs/device-buffers.md, "Measuring on a GPU"):
#
#   tools/gpu-check.sh prepare   on the development machine (Debian, both MPIs, gtest): builds the
#                                kernel check, the rate bench, the verdict, the multi-rank program
#                                and libhier.so with the MPICH preset and puts them, with the shared
#                                libraries they need that a CUDA image lacks, into .gpu-check/
#                                (git-ignored), and with them Debian's MPICH (the packages fetched
#                                by apt-get download into .gpu-check-debs/, unpacked by dpkg -x):
#                                the GPU machine has no MPI and no network.
#   tools/gpu-check.sh run       on the GPU machine, .gpu-check/ carried along: prints the device,
#                                builds the CUDA module there with nvcc (sm_90 and sm_80), then
#                                  2. the module's kernels against the host bodies (tests/device/module_test.cpp);
#                                  3. the rate bench (bench/device: copies, f32 sum, quantization, pack and
#                                     unpack against a device-to-device copy) and its verdict (below);
#                                  4. hier-tune's device rates (a tune file with its "device" section);
#                                  5. device-buffer collectives on 2 and 4 ranks sharing the GPU, under the
#                                     carried MPICH (not GPU-aware: libhier stages the message steps):
#                                     allreduce (exact in int32, int8 in float), reduce_scatter_block,
#                                     allgather, bcast, each against the same call done by hand (copy to
#                                     host, MPI, copy back), both timed (bench/device/device_ranks.cpp).
#                                Exit 0 only when every step passed and every rate target is met.
#   tools/gpu-check.sh verdict FILE   the rate targets (bench/device/targets.hpp) against a
#                                bench_device JSON: one PASS / FAIL line per target, exit 0 when
#                                all are met, 1 when not (pack and unpack >= 0.7x of a device-to-
#                                device copy, quantize and dequantize + add >= 0.5x, at 16 MiB and
#                                256 MiB; a target the file lacks fails).
#   tools/gpu-check.sh limits [sim]   the sum of the steps' time limits (seconds) on a GPU (540), or
#                                on the simulated device without nvcc (the ctest's TIMEOUT)
#   tools/gpu-check.sh --help
#
# Why prepared here: the kernel check and the bench build their layouts as MPI datatypes (the
# random types of tests/dtype, bench/pack's table), and the project's CMake needs MPI, gtest,
# nlohmann_json and Fortran, none of which a CUDA image is known to have. The binaries are
# x86-64 Debian 12 builds; the CUDA module itself is built on the GPU machine by its own nvcc.
#
# Environment:
#   OUT              where the results go (gpu-check.txt, kernel_check.txt, bench_device.txt/.json,
#                    verdict.txt, tune.json, ranks_np<n>.txt/.json and each launch's libhier reports
#                    ranks_np<n>.report.<rank>.json: the paths the calls took); default ./gpu-check-out
#   GPU_CHECK_SIM=1  run on the simulated device (tests/device's stand-in memory and runtime, the
#                    simulated module), on a machine without a GPU: the same steps, rates printed
#                    but not judged; the multi-rank step uses the carried MPICH where .gpu-check
#                    has it, else the system's mpiexec.mpich
#   GPU_CHECK_NVCC   the nvcc to build the CUDA module with (default: nvcc on PATH, else
#                    /usr/local/cuda/bin/nvcc); GPU_CHECK_NVCC=off skips the build (sim runs)
#   GPU_CHECK_BUILD  prepare's build folder (default build/mpich, the mpich preset's)
#   GPU_CHECK_NTYPES random datatypes of the kernel check (default 1500; 200 on the simulated device)
#   GPU_CHECK_FROM_BUILD  run from a build tree's binaries instead of .gpu-check (the ctest
#                    tools.gpu_check_sim: GPU_CHECK_SIM=1 GPU_CHECK_NVCC=off), its launcher in
#                    GPU_CHECK_MPIEXEC (and GPU_CHECK_MPIEXEC_FLAGS)
set -u
cd "$(dirname "$0")/.."

# Each step's time limit (seconds), in one table: building the CUDA module, the kernel check,
# the rate bench, hier-tune, the multi-rank step (all its launches together), and what runs
# between them (REST: the setup, the unpacking, the log). On a GPU all of them together fit the
# issue's 9 minutes (`gpu-check.sh limits` prints the sum). On the simulated device each limit is
# SIM_SLACK times longer (its steps share a loaded 2-core machine in the suite, where the bench
# alone took 68 s at a load of 15): `gpu-check.sh limits sim` prints that sum without nvcc, the
# ctest tools.gpu_check_sim's TIMEOUT (bench/device/CMakeLists.txt; it builds no CUDA module).
LIMIT_NVCC=120 LIMIT_KERNELS=90 LIMIT_BENCH=180 LIMIT_TUNE=60 LIMIT_RANKS=60 LIMIT_REST=30 SIM_SLACK=2

limits() {
  if [ "${1:-}" = sim ]; then
    echo $((SIM_SLACK * (LIMIT_KERNELS + LIMIT_BENCH + LIMIT_TUNE + LIMIT_RANKS + LIMIT_REST)))
  else
    echo $((LIMIT_NVCC + LIMIT_KERNELS + LIMIT_BENCH + LIMIT_TUNE + LIMIT_RANKS + LIMIT_REST))
  fi
}
ROOT=$PWD
STAGE=$ROOT/.gpu-check
DEBS=$ROOT/.gpu-check-debs
# Debian's MPICH as it travels: the launcher (mpich), the library (libmpich12) and the libraries
# they load that a CUDA image may lack.
MPICH_PACKAGES="mpich libmpich12 libhwloc15 libucx0 libnuma1 libslurm38 libudev1"

prepare() {
  set -e
  local build=${GPU_CHECK_BUILD:-build/mpich}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-/work}
  [ -f "$build/CMakeCache.txt" ] || cmake --preset mpich
  local targets="bench_device device_module hier-tune hier_gpu_sim fake_gpu fake_cuda gpu_verdict device_ranks hier"
  if grep -q '^HIER_GPU_CUDA_CHECK:BOOL=ON' "$build/CMakeCache.txt" && [ -x /usr/local/cuda/bin/nvcc ]; then
    targets="$targets hier_gpu_cuda"
  fi
  nice -n 10 cmake --build "$build" -j2 --target $targets
  rm -rf "$STAGE"
  mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/sim/fakecuda"
  cp "$build/bench/device/bench_device" "$build/bench/device/gpu_verdict" "$build/bench/device/device_ranks" \
     "$build/tests/device/device_module" "$build/hier-tune" "$build/libhier.so" "$STAGE/bin/"
  # Debian's MPICH, unpacked (dpkg -x) into a prefix that travels compressed.
  mkdir -p "$DEBS" "$STAGE/mpich"
  (cd "$DEBS" && apt-get download $MPICH_PACKAGES >/dev/null) || {
    echo "gpu-check: apt-get download $MPICH_PACKAGES failed (network?)" >&2
    return 1
  }
  local deb
  for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$STAGE/mpich"; done
  (cd "$DEBS" && ls *.deb) >"$STAGE/MPICH"
  local mpich_lib=$STAGE/mpich/usr/lib/x86_64-linux-gnu
  [ -f "$build/libhier-cuda.so" ] && cp "$build/libhier-cuda.so" "$STAGE/bin/"  # used if nvcc fails there
  cp "$build/libhier-sim.so" "$STAGE/sim/"
  cp -L "$build/tests/device/fakecuda/libcuda.so.1" "$STAGE/sim/fakecuda/"
  # Every shared library the binaries load, except the C and C++ runtimes (the GPU machine's own,
  # newer ones serve; an older libstdc++ could not load a module its g++ built).
  local f lib
  for f in "$STAGE"/bin/bench_device "$STAGE"/bin/device_module "$STAGE"/bin/hier-tune "$STAGE"/bin/device_ranks \
           "$STAGE"/bin/libhier.so; do
    ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
      case $(basename "$lib") in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
        *) [ -e "$mpich_lib/$(basename "$lib")" ] || cp -nL "$lib" "$STAGE/lib/" ;;  # the MPICH prefix has it
      esac
    done
  done
  # Small enough to travel (the run tool takes 64 MiB with the working tree): no debug
  # information, and the libraries compressed (Debian's libmpich.so.12 alone is 41 MB).
  strip "$STAGE"/bin/bench_device "$STAGE"/bin/device_module "$STAGE"/bin/hier-tune "$STAGE"/bin/device_ranks \
        "$STAGE"/bin/gpu_verdict "$STAGE"/bin/libhier.so
  tar -C "$STAGE" -czf "$STAGE/lib.tar.gz" lib
  tar -C "$STAGE" -czf "$STAGE/mpich.tar.gz" mpich
  rm -rf "$STAGE/lib" "$STAGE/mpich"
  git rev-parse HEAD >"$STAGE/PREPARED" 2>/dev/null || true
  echo "gpu-check: prepared $(du -sh "$STAGE" | cut -f1) in .gpu-check (commit $(cat "$STAGE/PREPARED" 2>/dev/null))"
  echo "gpu-check: on the GPU machine: carry .gpu-check, run tools/gpu-check.sh run"
}

# The multi-rank step's launches: np 2 and 4 under HIER_QUANT=allreduce=int8 (the float allreduce
# quantized, the int32 one and the other calls exact), each rank's environment passed through the
# launcher (Open MPI: -x, MPICH's hydra: -genv), never preloaded into the launcher itself. Uses
# say, bin, OUT, yield and LIMIT_RANKS of run().
ranks_step() {
  local mpiexec=$1 module=$2 runtime=$3 sim=$4 fake=$5 kind=hydra flags=() np rc=0 t0=$SECONDS
  "$mpiexec" --version 2>&1 | grep -qi "open mpi\|openrte" && kind=openmpi
  [ "$kind" = openmpi ] && flags=(--oversubscribe --allow-run-as-root --bind-to none)
  # shellcheck disable=SC2206
  [ -n "${GPU_CHECK_MPIEXEC_FLAGS:-}" ] && flags=(${GPU_CHECK_MPIEXEC_FLAGS})
  local preload=$bin/libhier.so bytes="1048576,67108864" iters=5
  if [ "$sim" = 1 ]; then
    preload=$fake:$runtime:$bin/libhier.so bytes="65536" iters=1
  fi
  [ -n "$yield" ] && preload=$preload:$yield
  for np in 2 4; do
    local envs=(LD_PRELOAD="$preload" HIER_GPU_MODULE="$module" HIER_ALGO=hier HIER_LEVELS=node:2
                HIER_QUANT=allreduce=int8 FAKE_GPU_AWARE=0 LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
                HIER_REPORT="$OUT/ranks_np$np.report.%r.json")
    local eflags=() kv
    for kv in "${envs[@]}"; do
      if [ "$kind" = openmpi ]; then eflags+=(-x "$kv"); else eflags+=(-genv "${kv%%=*}" "${kv#*=}"); fi
    done
    local left=$((LIMIT_RANKS - (SECONDS - t0)))
    [ $left -lt 5 ] && left=5
    if timeout "$left" "$mpiexec" "${flags[@]}" -n "$np" "${eflags[@]}" "$bin/device_ranks" --module "$module" \
         --runtime "$runtime" --bytes "$bytes" --iters "$iters" --int8 --json "$OUT/ranks_np$np.json" \
         >"$OUT/ranks_np$np.txt" 2>&1; then
      grep '^np ' "$OUT/ranks_np$np.txt" | tee -a "$log"
    else
      say "np $np: FAILED (exit $?; $OUT/ranks_np$np.txt):"
      grep '^np ' "$OUT/ranks_np$np.txt" | tee -a "$log"
      tail -5 "$OUT/ranks_np$np.txt" | tee -a "$log"
      rc=1
    fi
  done
  say "multi-rank step: $([ $rc = 0 ] && echo PASSED || echo FAILED) in $((SECONDS - t0)) s (limit $LIMIT_RANKS s)"
  return $rc
}

# The verdict alone: gpu_verdict from the build (GPU_CHECK_FROM_BUILD), .gpu-check, or a build folder.
verdict() {
  local file=${1:-} v
  if [ -z "$file" ]; then
    echo "usage: tools/gpu-check.sh verdict FILE   (FILE: bench_device's JSON, e.g. gpu-check-out/bench_device.json)" >&2
    return 2
  fi
  for v in ${GPU_CHECK_FROM_BUILD:+"$GPU_CHECK_FROM_BUILD/bench/device/gpu_verdict"} "$STAGE/bin/gpu_verdict" \
           "$ROOT"/build/*/bench/device/gpu_verdict; do
    [ -x "$v" ] && exec "$v" "$file"
  done
  echo "gpu-check: no gpu_verdict built (build the target gpu_verdict, or run prepare)" >&2
  return 2
}

usage() {
  sed -n '2,/^set -u/p' "$0" | sed -n 's/^# \{0,1\}//p'
}

run() {
  local sim=${GPU_CHECK_SIM:-0}
  if [ "$sim" = 1 ]; then
    LIMIT_NVCC=$((SIM_SLACK * LIMIT_NVCC)) LIMIT_KERNELS=$((SIM_SLACK * LIMIT_KERNELS)) LIMIT_BENCH=$((SIM_SLACK * LIMIT_BENCH))
    LIMIT_TUNE=$((SIM_SLACK * LIMIT_TUNE)) LIMIT_RANKS=$((SIM_SLACK * LIMIT_RANKS))
  fi
  OUT=${OUT:-$ROOT/gpu-check-out}
  mkdir -p "$OUT"
  local log=$OUT/gpu-check.txt work
  work=$(mktemp -d /tmp/gpu-check.XXXXXX)
  : >"$log"
  say() { echo "$*" | tee -a "$log"; }
  local status=0 bin sim_dir fake_gpu from runtime_sim mpiexec="" mpi_from="" yield=""
  if [ -n "${GPU_CHECK_FROM_BUILD:-}" ]; then  # a build tree's own binaries (the ctest)
    local b=$GPU_CHECK_FROM_BUILD
    mkdir -p "$work/bin"
    ln -s "$b/bench/device/bench_device" "$b/bench/device/gpu_verdict" "$b/bench/device/device_ranks" \
          "$b/tests/device/device_module" "$b/hier-tune" "$b/libhier.so" "$work/bin/"
    bin=$work/bin sim_dir=$b fake_gpu=$b/tests/device/libfake_gpu.so from="build $b"
    runtime_sim=$b/tests/device/fakecuda/libcuda.so.1
    mpiexec=${GPU_CHECK_MPIEXEC:-} mpi_from="the build's launcher"
    [ -e "$b/test_yield_when_idle.so" ] && yield=$b/test_yield_when_idle.so  # MPICH's ranks on few cores
  elif [ -x "$STAGE/bin/bench_device" ]; then
    tar -C "$work" -xzf "$STAGE/lib.tar.gz"
    export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    bin=$STAGE/bin sim_dir=$STAGE/sim fake_gpu=$work/lib/libfake_gpu.so
    from="prepared from $(cut -c1-12 "$STAGE/PREPARED" 2>/dev/null || echo '?')"
    runtime_sim=$STAGE/sim/fakecuda/libcuda.so.1
    if [ -f "$STAGE/mpich.tar.gz" ]; then  # the MPICH that travels (Debian's packages, unpacked)
      tar -C "$work" -xzf "$STAGE/mpich.tar.gz"
      export PATH=$work/mpich/usr/bin:$PATH
      export LD_LIBRARY_PATH=$work/mpich/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
      mpiexec=$work/mpich/usr/bin/mpiexec.hydra mpi_from="Debian's MPICH carried in .gpu-check ($(tr '\n' ' ' <"$STAGE/MPICH"))"
    fi
  else
    say "gpu-check: .gpu-check/ is missing: run 'tools/gpu-check.sh prepare' on the development machine and carry .gpu-check"
    return 2
  fi
  say "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), source $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $from"
  local module runtime preload=""
  if [ "$sim" = 1 ]; then
    say "device: SIMULATED (GPU_CHECK_SIM=1): tests/device's stand-in memory and runtime; timings mean nothing"
    module=$sim_dir/libhier-sim.so
    runtime=$runtime_sim
    preload=$fake_gpu
  else
    if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
      say "gpu-check: no NVIDIA GPU (nvidia-smi finds none); GPU_CHECK_SIM=1 runs on the simulated device"
      return 2
    fi
    say "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
    runtime=libcuda.so.1
  fi

  # 1. The CUDA module, built here by this machine's nvcc (the same command as src/gpu/CMakeLists.txt's
  #    target: C++17, runtime static, hidden symbols), for the H100's sm_90 and the A100's sm_80.
  local nvcc=${GPU_CHECK_NVCC:-}
  [ -z "$nvcc" ] && nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ "$nvcc" != off ] && [ -x "$nvcc" ]; then
    say "nvcc: $("$nvcc" --version | tail -1)"
    local t0=$SECONDS
    if timeout "$LIMIT_NVCC" "$nvcc" -std=c++17 -O3 -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -cudart static \
         -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 -I"$ROOT/src" \
         "$ROOT/src/gpu/module.cu" -o "$work/libhier-cuda.so" >"$work/nvcc.txt" 2>&1; then
      say "CUDA module built in $((SECONDS - t0)) s: libhier-cuda.so (sm_90, sm_80)"
      [ "$sim" = 1 ] || module=$work/libhier-cuda.so
    else
      say "CUDA module: nvcc FAILED ($(tail -3 "$work/nvcc.txt" | tr '\n' ' '))"
      status=1
    fi
  else
    say "CUDA module: no nvcc ($nvcc), not built"
  fi
  if [ -z "${module:-}" ]; then
    if [ -f "$bin/libhier-cuda.so" ]; then
      module=$bin/libhier-cuda.so
      say "using the CUDA module prepared on the development machine"
    else
      say "gpu-check: no CUDA module to run"
      return 1
    fi
  fi

  # 2. The module's kernels against the host bodies (tests/device/module_test.cpp): pack / unpack
  #    of random datatypes, the 91 reductions, quantize / dequantize(-add) / feedback.
  local ntypes=${GPU_CHECK_NTYPES:-$([ "$sim" = 1 ] && echo 200 || echo 1500)}
  say ""
  say "## Kernel check: $(basename "$module") against the host bodies ($ntypes random datatypes)"
  if HIER_TEST_MODULE=$module HIER_TEST_NTYPES=$ntypes timeout "$LIMIT_KERNELS" "$bin/device_module" >"$OUT/kernel_check.txt" 2>&1; then
    say "kernel check: PASSED ($(grep -c '^\[       OK \]' "$OUT/kernel_check.txt") tests)"
  else
    say "kernel check: FAILED (exit $?; $OUT/kernel_check.txt):"
    grep -E 'FAILED|Failure|differ' "$OUT/kernel_check.txt" | head -20 | tee -a "$log"
    status=1
  fi

  # 3. The rates (bench/device/bench_device.cpp), each kernel's result checked first.
  say ""
  say "## Rates: bench_device"
  if env ${preload:+LD_PRELOAD=$preload} timeout "$LIMIT_BENCH" "$bin/bench_device" --module "$module" --runtime "$runtime" \
       --json "$OUT/bench_device.json" >"$OUT/bench_device.txt" 2>&1; then
    cat "$OUT/bench_device.txt" >>"$log"
  else
    say "bench_device: FAILED (exit $?)"
    cat "$OUT/bench_device.txt" >>"$log"
    status=1
  fi
  cat "$OUT/bench_device.txt"
  # The verdict on the rates (bench/device/gpu_verdict.cpp): judged on a GPU, printed on the
  # simulated device (its rates mean nothing).
  say ""
  if [ "$sim" = 1 ]; then
    say "## Rates against the targets (simulated device: not judged)"
    "$bin/gpu_verdict" --rates "$OUT/bench_device.json" >"$OUT/verdict.txt" 2>&1
    tee -a "$log" <"$OUT/verdict.txt"
  else
    say "## Verdict: the rate targets (bench/device/targets.hpp)"
    "$bin/gpu_verdict" "$OUT/bench_device.json" >"$OUT/verdict.txt" 2>&1 || status=1
    tee -a "$log" <"$OUT/verdict.txt"
  fi

  # 4. hier-tune's device rates (tools/hier-tune, the tune file's "device" section), one rank:
  #    what libhier's planners would read on this machine.
  say ""
  say "## hier-tune --quick with the module (one rank): $OUT/tune.json"
  local pre=$runtime
  [ -n "$preload" ] && pre=$preload:$runtime
  if env LD_PRELOAD="$pre" HIER_GPU_MODULE="$module" timeout "$LIMIT_TUNE" "$bin/hier-tune" --quick -o "$OUT/tune.json" \
       >"$work/tune.txt" 2>&1; then
    if command -v python3 >/dev/null; then
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("device", "no device section"), indent=1))' \
        "$OUT/tune.json" 2>&1 | tee -a "$log"
    else
      say "hier-tune: written to $OUT/tune.json (no python3 here to show its device section)"
    fi
  else
    say "hier-tune: FAILED (exit $?): $(tail -3 "$work/tune.txt" | tr '\n' ' ')"
    status=1
  fi

  # 5. Device-buffer collectives on 2 and 4 ranks sharing the device (bench/device/device_ranks.cpp),
  #    libhier preloaded with the module, the MPI not GPU-aware (the carried MPICH; on the
  #    simulated device its stand-in MPI told so): libhier's schedules stage the message steps.
  say ""
  say "## Device-buffer collectives on 2 and 4 ranks (libhier preloaded, module $(basename "$module"))"
  if [ -z "$mpiexec" ] && [ "$sim" = 1 ] && command -v mpiexec.mpich >/dev/null; then
    mpiexec=$(command -v mpiexec.mpich) mpi_from="the system's MPICH (simulated device)"
  fi
  if [ -z "$mpiexec" ] || [ ! -x "$mpiexec" ]; then
    say "multi-rank step: FAILED: no MPI launcher (.gpu-check has no mpich.tar.gz: run prepare again)"
    status=1
  else
    say "MPI: $mpi_from: $mpiexec"
    ranks_step "$mpiexec" "$module" "$runtime" "$sim" "$preload" || status=1
  fi

  say "gpu-check: $([ $status = 0 ] && echo PASSED || echo FAILED); results in $OUT"
  rm -rf "$work"
  return $status
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  verdict) verdict "${2:-}" ;;
  limits) limits "${2:-}" ;;
  -h|--help|help) usage ;;
  *) echo "usage: tools/gpu-check.sh prepare | run | verdict FILE | limits [sim] | --help   (GPU_CHECK_SIM=1 run: the simulated device)" >&2; exit 2 ;;
esac
