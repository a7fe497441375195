# Proves that the layer check the build runs (tools/check_layers.py, src/CMakeLists.txt) refuses
# real violations in the real tree: copies src/ (and the top CMakeLists.txt) under WORK, checks
# that the untouched copy passes, then breaks the copy one way at a time and expects the one
# line for it. The source tree is never modified.
#   cmake -DSRC=<project>/src -DTOP=<project>/CMakeLists.txt -DWORK=<dir> -DPY=<python>
#         -DCHECK=<project>/tools/check_layers.py -P test_layers_refuse.cmake
foreach(v SRC TOP WORK PY CHECK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "test_layers_refuse: -D${v}=... missing")
  endif()
endforeach()

function(fresh_copy)
  file(REMOVE_RECURSE ${WORK})
  file(MAKE_DIRECTORY ${WORK})
  file(COPY ${SRC} DESTINATION ${WORK})
  file(COPY ${TOP} DESTINATION ${WORK})
endfunction()

# expect(<rc> <regex> <what>): runs the check on the copy.
function(expect rc regex what)
  execute_process(COMMAND ${PY} ${CHECK} ${WORK}/src RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${what}: exit ${got}\n${out}")
  if(NOT got STREQUAL "${rc}")
    message(FATAL_ERROR "${what}: exit status ${got}, expected ${rc}")
  endif()
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${what}: output does not match '${regex}'")
  endif()
endfunction()

# replace(<file under WORK/src> <from> <to>): fails when <from> is not there (the test would
# otherwise pass on a tree where the edit did nothing).
function(replace rel from to)
  file(READ ${WORK}/src/${rel} text)
  string(FIND "${text}" "${from}" at)
  if(at LESS 0)
    message(FATAL_ERROR "test_layers_refuse: '${from}' not in src/${rel}: update this test")
  endif()
  string(REPLACE "${from}" "${to}" text "${text}")
  file(WRITE ${WORK}/src/${rel} "${text}")
endfunction()

fresh_copy()
expect(0 "^$" "the untouched tree")

# dtype/ including core/ (the arrow points the other way).
file(APPEND ${WORK}/src/dtype/ir.hpp "#include \"core/wrap.hpp\"\n")
expect(1 "src/dtype/ir\\.hpp:[0-9]+: dtype/ may not include core/" "dtype includes core")

# exec/ including core/.
fresh_copy()
file(APPEND ${WORK}/src/exec/executor.cpp "#include \"core/dispatch_coll.hpp\"\n")
expect(1 "src/exec/executor\\.cpp:[0-9]+: exec/ may not include core/" "exec includes core")

# The same through angle brackets.
fresh_copy()
file(APPEND ${WORK}/src/sched/ir.hpp "#include <exec/executor.hpp>\n")
expect(1 "src/sched/ir\\.hpp:[0-9]+: sched/ may not include exec/" "sched includes exec with <>")

# The generated hier/fn.hpp outside the layers that may use it.
fresh_copy()
file(APPEND ${WORK}/src/topo/levels.cpp "#include \"hier/fn.hpp\"\n")
expect(1 "src/topo/levels\\.cpp:[0-9]+: topo/ may not include the generated hier/fn\\.hpp" "topo includes hier/fn.hpp")

# A header internal to exec/ included by another layer (core).
fresh_copy()
file(APPEND ${WORK}/src/core/wrap.hpp "#include \"exec/request_engine.hpp\"\n")
expect(1 "src/core/wrap\\.hpp:[0-9]+: exec/request_engine\\.hpp is internal to exec/" "core includes exec's internals")

# A link to a layer no file includes: sched without its one include of quant/.
fresh_copy()
replace(sched/build_quant.cpp "#include \"quant/format.hpp\"" "")
expect(1 "src/sched/CMakeLists.txt: hier_sched links hier_quant, but no file of sched/ includes quant/" "sched links quant unused")

# A link across a forbidden arrow: sched linking exec.
fresh_copy()
replace(sched/CMakeLists.txt "PRIVATE hier_quant" "PRIVATE hier_exec hier_quant")
expect(1 "src/sched/CMakeLists.txt: hier_sched may not link hier_exec" "sched links exec")

# PUBLIC where no header needs it.
fresh_copy()
replace(dtype/CMakeLists.txt "PRIVATE hier_config" "PUBLIC hier_config PRIVATE")
expect(1 "hier_dtype links hier_config PUBLIC, but no header of dtype/ includes config/: link it PRIVATE"
       "dtype links config PUBLIC")

# A leaf linking a layer.
fresh_copy()
file(APPEND ${WORK}/src/util/CMakeLists.txt "target_link_libraries(hier_util PRIVATE hier_config)\n")
expect(1 "hier_util is a leaf and may not link hier_config" "util links config")

# A layer folded into another library instead of its own.
fresh_copy()
file(WRITE ${WORK}/src/util/CMakeLists.txt "target_sources(hier_base PRIVATE strings.cpp)\n")
expect(1 "src/util/CMakeLists.txt: the layer is not its own library" "util is not a library")

# A tool including a layer its target does not link (tools/ and tests/ beside src/ are checked).
fresh_copy()
file(WRITE ${WORK}/tools/x/CMakeLists.txt "add_executable(x x.cpp)\ntarget_link_libraries(x PRIVATE hier_config)\n")
file(WRITE ${WORK}/tools/x/x.cpp "#include \"config/config.hpp\"\n#include \"exec/executor.hpp\"\n")
file(MAKE_DIRECTORY ${WORK}/tests)
expect(1 "^tools/x/x\\.cpp:2: includes exec/, but tools/x/CMakeLists\\.txt links no library that gives it" "a tool includes exec")

file(REMOVE_RECURSE ${WORK})
