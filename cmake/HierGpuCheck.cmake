# The GPU compilers: nvcc (CUDA) and hipcc (HIP) build the GPU modules (src/gpu/CMakeLists.txt)
# and the compile-only checks of hier_gpu_compile_check() (objects never linked, never run, never
# in libhier.so: the 16-bit-float quantization kernels, src/quant). Included at the top level
# (enable_language must run in file scope).
#   HIER_GPU_CUDA_CHECK (default: on where /usr/local/cuda/bin/nvcc exists): sm_80 and sm_90
#     (A100, H100) unless CMAKE_CUDA_ARCHITECTURES says otherwise; a machine without nvcc
#     configures as before.
#   HIER_GPU_HIP_CHECK (default: on where hipcc is found; tools/test.sh installs Debian's): gfx90a,
#     the MI250X. gfx942 (MI300) is added where hipcc knows it (Debian's ROCm 5.2 does not).
#     hipcc is not a CMake language here (Debian's ROCm has no CMake HIP support files), so it
#     runs as a command.
set(_hier_nvcc_default OFF)
if(EXISTS /usr/local/cuda/bin/nvcc)
  set(_hier_nvcc_default ON)
endif()
option(HIER_GPU_CUDA_CHECK "Compile the GPU kernels with nvcc (compile only)" ${_hier_nvcc_default})
set(HIER_GPU_CUDA OFF)
if(HIER_GPU_CUDA_CHECK)
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(DEFINED CMAKE_CUDA_COMPILER AND NOT EXISTS "${CMAKE_CUDA_COMPILER}")
    set(CMAKE_CUDA_COMPILER NOTFOUND)  # a stale or wrong path: skip the check, don't fail
  else()
    check_language(CUDA)
  endif()
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(HIER_GPU_CUDA ON)
  else()
    message(STATUS "HIER_GPU_CUDA_CHECK: no working CUDA compiler, the nvcc compile checks are skipped")
  endif()
else()  # one line in every log that ran without the check (CI's included), saying why
  message(STATUS "HIER_GPU_CUDA_CHECK off (no /usr/local/cuda/bin/nvcc, or -DHIER_GPU_CUDA_CHECK=OFF): the CUDA compile checks are skipped")
endif()

find_program(HIER_HIPCC hipcc)
set(_hier_hip_default OFF)
if(HIER_HIPCC)
  set(_hier_hip_default ON)
endif()
option(HIER_GPU_HIP_CHECK "Compile the GPU kernels with hipcc (compile only)" ${_hier_hip_default})
set(HIER_GPU_HIP_ARCHS --offload-arch=gfx90a)
if(HIER_GPU_HIP_CHECK AND HIER_HIPCC)
  execute_process(COMMAND ${HIER_HIPCC} -x hip --offload-arch=gfx942 -E -o /dev/null /dev/null
                  RESULT_VARIABLE _hier_gfx942 OUTPUT_QUIET ERROR_QUIET)
  if(_hier_gfx942 EQUAL 0)
    list(APPEND HIER_GPU_HIP_ARCHS --offload-arch=gfx942)
  endif()
elseif(HIER_GPU_HIP_CHECK)
  message(STATUS "HIER_GPU_HIP_CHECK: no hipcc, the HIP compile checks are skipped")
endif()

# hier_gpu_compile_check(<cuda target> <hip target> <source.cu> <headers it depends on...>)
function(hier_gpu_compile_check cuda_target hip_target source)
  if(HIER_GPU_CUDA)
    add_library(${cuda_target} OBJECT ${source})
    target_include_directories(${cuda_target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    set_target_properties(${cuda_target} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  endif()
  if(HIER_GPU_HIP_CHECK AND HIER_HIPCC)
    get_filename_component(_src ${source} ABSOLUTE)
    set(_obj ${CMAKE_CURRENT_BINARY_DIR}/${hip_target}.o)
    add_custom_command(OUTPUT ${_obj}
      COMMAND ${HIER_HIPCC} -x hip ${HIER_GPU_HIP_ARCHS} -std=c++17 -I${PROJECT_SOURCE_DIR}/src -c ${_src} -o ${_obj}
      DEPENDS ${_src} ${ARGN} ${PROJECT_SOURCE_DIR}/src/device/hd.hpp
      COMMENT "HIP compile check ${hip_target} (hipcc: ${HIER_GPU_HIP_ARCHS})" VERBATIM)
    add_custom_target(${hip_target} ALL DEPENDS ${_obj})
  endif()
endfunction()
