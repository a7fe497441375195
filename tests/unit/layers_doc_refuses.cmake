# Proves that check_layers.py --doc refuses a layer table that differs from the script's: copies
# docs/architecture.md under WORK with sched/ allowed to include exec/ and expects the one line.
#   cmake -DDOC=<doc> -DWORK=<dir> -DPY=<python> -DCHECK=<check_layers.py> -DSRC=<src> -P layers_doc_refuses.cmake
file(READ ${DOC} text)
set(row "| `sched/` | `topo/`, `quant/` |")
string(FIND "${text}" "${row}" at)
if(at LESS 0)
  message(FATAL_ERROR "layers_doc_refuses: '${row}' not in ${DOC}: update this test")
endif()
string(REPLACE "${row}" "| `sched/` | `topo/`, `quant/`, `exec/` |" text "${text}")
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/architecture.md "${text}")
execute_process(COMMAND ${PY} ${CHECK} --doc ${SRC} ${WORK}/architecture.md RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 1 OR NOT out MATCHES "sched/ may include quant, topo \\(tools/check_layers.py\\), the table says exec, quant, topo")
  message(FATAL_ERROR "layers_doc_refuses: exit ${rc}, expected 1 and the line for sched/")
endif()
file(REMOVE_RECURSE ${WORK})
