# Test helpers shared by every folder under tests/.
#
#   hier_add_unit_test(NAME n SOURCES s... [LIBS l...])
#       GoogleTest without MPI ranks (may still call MPI-free helpers of the layers in LIBS).
#   hier_add_mpi_test(NAME n SOURCES s... NP 1 2 4 [ENV "HIER_X=y" ...] [LIBS l...]
#                     [NO_PRELOAD] [VARIANT tag] [TIMEOUT s] [EXPECT_OUTPUT regex])
#       GoogleTest under the preset's mpiexec, one ctest per rank count, named n.<tag>.npN.
#       By default libhier.so is preloaded on the ranks (not on the launcher), so MPI_* calls go
#       through the wrappers while PMPI_* calls give the reference result in the same test.
#       EXPECT_OUTPUT: the run must also print a match (cmake/expect_output.cmake: exit status too).
#   hier_mpi_command(out NP n [ENV ...] [NO_PRELOAD] -- cmd...)
#       The launcher command line, for tests that are scripts.
#   hier_test_ranks(test... RANKS n)
#       ctest's PROCESSORS for tests that start n ranks: n, at most HIER_TEST_CORES (the cores of
#       the machine that configured). Ranks beyond the cores only share them, so such a test
#       keeps the machine busy whatever its n; tools/test.sh runs ctest with one slot more than
#       the cores, which a test of PROCESSORS 1 (mostly waiting: the hang tests' watchdog
#       limits, the report checks) takes beside it. A test that must run alone says RUN_SERIAL.
#   Every rank also preloads tests/support/yield_when_idle.c (HIER_TEST_YIELD): under MPICH a
#   waiting rank yields its core instead of busy-polling it, as Open MPI's ranks already do when
#   oversubscribed (the tests ran ~4x faster on 2 cores), and under both a thread that does
#   nothing but yield naps, so that ranks that wait leave the cores to the tests beside them.
include_guard(GLOBAL)
enable_testing()

option(HIER_TEST_YIELD "MPI tests: preload a wrapper that yields the core when the MPI polls in vain" ON)
if(HIER_TEST_YIELD)
  add_library(hier_test_yield MODULE ${PROJECT_SOURCE_DIR}/tests/support/yield_when_idle.c)
  target_link_libraries(hier_test_yield PRIVATE ${CMAKE_DL_LIBS})
  # A name no check mistakes for libhier.so or for an MPI library (hier-tune, hier-run look).
  set_target_properties(hier_test_yield PROPERTIES PREFIX "" OUTPUT_NAME test_yield_when_idle)
  set(HIER_TEST_PRELOAD $<TARGET_FILE:hier_test_yield>)
else()
  set(HIER_TEST_PRELOAD "")
endif()

# The test programs' malloc keeps its pages (GLIBC_TUNABLES in every hier_add_mpi_test and
# hier_add_unit_test run): blocks up to 32 MiB come from the heap and freed pages stay there. The
# tests allocate and free large buffers case after case, and on the virtual machines this suite
# runs on every fresh page's fault and every munmap's TLB shootdown is expensive (perf: a third of
# an np8 test's time); an np8 test then takes 0.65 of the time, Open MPI and MPICH alike. It
# changes where the test program's memory comes from, not what libhier or the MPI do. The hang
# cases (tests/diag, tests/cluster) run without it: their mismatched counts overrun buffers, and
# what an overrun hits is then another thing. Empty: glibc's defaults.
set(HIER_TEST_MALLOC "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295" CACHE STRING
    "GLIBC_TUNABLES of the MPI and unit test programs (empty: glibc's defaults)")

cmake_host_system_information(RESULT _hier_cores QUERY NUMBER_OF_LOGICAL_CORES)
set(HIER_TEST_CORES ${_hier_cores} CACHE STRING "The most ctest PROCESSORS an MPI test claims (hier_test_ranks)")

function(hier_test_ranks)
  cmake_parse_arguments(A "" "RANKS" "" ${ARGN})
  set(n ${A_RANKS})
  if(n GREATER HIER_TEST_CORES)
    set(n ${HIER_TEST_CORES})
  endif()
  set_tests_properties(${A_UNPARSED_ARGUMENTS} PROPERTIES PROCESSORS ${n})
endfunction()

function(hier_mpi_command out)
  cmake_parse_arguments(A "NO_PRELOAD" "NP" "ENV;COMMAND" ${ARGN})
  set(cmd ${HIER_MPIEXEC} ${HIER_MPIEXEC_FLAGS} -n ${A_NP})
  # LD_PRELOAD: an ENV entry's value, else libhier.so (unless NO_PRELOAD); the test wrapper last.
  set(preload "")
  if(NOT A_NO_PRELOAD)
    set(preload $<TARGET_FILE:hier>)
  endif()
  foreach(kv IN LISTS A_ENV)
    string(FIND "${kv}" "=" eq)
    string(SUBSTRING "${kv}" 0 ${eq} k)
    math(EXPR eq "${eq}+1")
    string(SUBSTRING "${kv}" ${eq} -1 v)
    if(k STREQUAL "LD_PRELOAD")
      set(preload "${v}")
    else()
      hier_mpiexec_env(e ${k} "${v}")
      list(APPEND cmd ${e})
    endif()
  endforeach()
  if(HIER_TEST_PRELOAD)
    if(preload)
      set(preload "${preload}:${HIER_TEST_PRELOAD}")
    else()
      set(preload "${HIER_TEST_PRELOAD}")
    endif()
  endif()
  if(preload)
    hier_mpiexec_env(e LD_PRELOAD "${preload}")
    list(APPEND cmd ${e})
  endif()
  list(APPEND cmd ${A_COMMAND})
  set(${out} ${cmd} PARENT_SCOPE)
endfunction()

function(hier_add_unit_test)
  cmake_parse_arguments(A "" "NAME;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${A_NAME} ${A_SOURCES})
  target_link_libraries(${A_NAME} PRIVATE GTest::gtest_main ${A_LIBS})
  add_test(NAME unit.${A_NAME} COMMAND ${A_NAME})
  set_tests_properties(unit.${A_NAME} PROPERTIES LABELS unit)
  if(HIER_TEST_MALLOC)
    set_tests_properties(unit.${A_NAME} PROPERTIES ENVIRONMENT "GLIBC_TUNABLES=${HIER_TEST_MALLOC}")
  endif()
  if(A_TIMEOUT)
    set_tests_properties(unit.${A_NAME} PROPERTIES TIMEOUT ${A_TIMEOUT})
  endif()
endfunction()

function(hier_add_mpi_test)
  cmake_parse_arguments(A "NO_PRELOAD" "NAME;VARIANT;TIMEOUT;EXPECT_OUTPUT" "SOURCES;NP;ENV;LIBS" ${ARGN})
  if(NOT TARGET ${A_NAME})
    add_executable(${A_NAME} ${A_SOURCES})
    target_link_libraries(${A_NAME} PRIVATE hier_gtest_mpi_main GTest::gtest MPI::MPI_C ${A_LIBS})
    if(HIER_TEST_YIELD)  # its runs preload the wrapper: building a test's target builds it too
      add_dependencies(${A_NAME} hier_test_yield)
    endif()
  endif()
  set(tag "")
  if(A_VARIANT)
    set(tag ".${A_VARIANT}")
  endif()
  set(np_list ${A_NP})
  if(NOT np_list)
    set(np_list 1 2 4)
  endif()
  set(pre "")
  if(A_NO_PRELOAD)
    set(pre NO_PRELOAD)
  endif()
  set(env ${A_ENV})
  if(HIER_TEST_MALLOC)
    list(APPEND env "GLIBC_TUNABLES=${HIER_TEST_MALLOC}")
  endif()
  foreach(np IN LISTS np_list)
    hier_mpi_command(cmd NP ${np} ENV ${env} ${pre} COMMAND $<TARGET_FILE:${A_NAME}>)
    if(A_EXPECT_OUTPUT)  # the output must match AND the run succeed (not PASS_REGULAR_EXPRESSION)
      set(cmd ${CMAKE_COMMAND} "-DREGEX=${A_EXPECT_OUTPUT}" -P ${PROJECT_SOURCE_DIR}/cmake/expect_output.cmake -- ${cmd})
    endif()
    set(t mpi.${A_NAME}${tag}.np${np})
    add_test(NAME ${t} COMMAND ${cmd})
    set_tests_properties(${t} PROPERTIES LABELS mpi)
    hier_test_ranks(${t} RANKS ${np})
    if(A_TIMEOUT)
      set_tests_properties(${t} PROPERTIES TIMEOUT ${A_TIMEOUT})
    endif()
  endforeach()
endfunction()
