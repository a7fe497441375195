# Debian installs MPICH and Open MPI side by side; `mpicc` points at one of them. Each preset
# names its MPI in HIER_MPI and we hand FindMPI that family's own wrappers, never the default.
set(HIER_MPI "" CACHE STRING "MPI family to build against: openmpi or mpich")
set_property(CACHE HIER_MPI PROPERTY STRINGS openmpi mpich)
if(NOT HIER_MPI MATCHES "^(openmpi|mpich)$")
  message(FATAL_ERROR "HIER_MPI='${HIER_MPI}': use a preset (cmake --preset openmpi | mpich) or -DHIER_MPI=openmpi|mpich")
endif()
foreach(lang C CXX Fortran)
  set(_wrapper_C mpicc)
  set(_wrapper_CXX mpicxx)
  set(_wrapper_Fortran mpifort)
  find_program(_w NAMES ${_wrapper_${lang}}.${HIER_MPI} NO_CACHE REQUIRED)
  set(MPI_${lang}_COMPILER ${_w} CACHE FILEPATH "${HIER_MPI} compiler wrapper for ${lang}" FORCE)
  unset(_w)
endforeach()
find_program(HIER_MPIEXEC NAMES mpiexec.${HIER_MPI} REQUIRED)
set(MPIEXEC_EXECUTABLE ${HIER_MPIEXEC} CACHE FILEPATH "" FORCE)
find_package(MPI REQUIRED COMPONENTS C Fortran)

# How the launcher passes one environment variable to the ranks only (not to itself).
if(HIER_MPI STREQUAL "openmpi")
  # Tests run as root in CI and oversubscribe two cores.
  set(HIER_MPIEXEC_FLAGS --allow-run-as-root --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none)
  function(hier_mpiexec_env out var value)
    set(${out} -x "${var}=${value}" PARENT_SCOPE)
  endfunction()
else()
  set(HIER_MPIEXEC_FLAGS)
  function(hier_mpiexec_env out var value)
    set(${out} -genv "${var}" "${value}" PARENT_SCOPE)
  endfunction()
endif()
message(STATUS "libhier: building for ${HIER_MPI} (${MPI_C_COMPILER}, launcher ${HIER_MPIEXEC})")

# Can this MPI reduce MPIX_C_FLOAT16 (C _Float16) with MPI_SUM? MPICH 4.0.2 defines the type and
# moves it, but aborts in every reduction of it (cmake/probe_f16_sum.c says why); Open MPI 4.1
# has no 16-bit float type. libhier quantizes MPIX_C_FLOAT16 reductions only where the MPI
# reduces the type itself (exec/coll_quant.cpp): HIER_MPI_REDUCES_F16 is 1 then. The answer is
# checked again at test time (unit.mpi_f16_sum_probe). Cached; -DHIER_MPI_REDUCES_F16=0|1 sets it.
if(NOT DEFINED HIER_MPI_REDUCES_F16)
  try_run(_f16_run _f16_compiled ${CMAKE_BINARY_DIR}/probe_f16_sum ${CMAKE_CURRENT_LIST_DIR}/probe_f16_sum.c
    LINK_LIBRARIES MPI::MPI_C COMPILE_OUTPUT_VARIABLE _f16_cout RUN_OUTPUT_VARIABLE _f16_rout)
  if(_f16_compiled AND "${_f16_run}" STREQUAL "0")
    set(_f16 1)
  else()
    set(_f16 0)
  endif()
  set(HIER_MPI_REDUCES_F16 ${_f16} CACHE BOOL "The MPI reduces MPIX_C_FLOAT16 with MPI_SUM (probed at configure time)")
  message(STATUS "libhier: ${HIER_MPI} reduces MPIX_C_FLOAT16 with MPI_SUM: ${_f16} (probe exit: ${_f16_run})")
  unset(_f16)
endif()
