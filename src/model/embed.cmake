# Writes the built-in model files as C++ string constants (raw literals), after checking that
# every collective they name is a row of config/collectives.def (DEF): the loader ignores
# names it does not know (a tune file from another version), so a built-in file that drifted
# from the table (a row renamed, a typo) would lose its figures silently. Chunk sizes only for
# rows the table pipelines.
#   cmake -DOUT=<header> -DOPENMPI=<json> -DMPICH=<json> -DDEF=<collectives.def> -P embed.cmake
cmake_minimum_required(VERSION 3.20)  # string(JSON), IN_LIST
file(STRINGS ${DEF} _rows REGEX "^HIER_COLL\\(")
set(_keys)
set(_pipelined)
foreach(_row IN LISTS _rows)
  if(NOT _row MATCHES "^HIER_COLL\\([A-Za-z]+, *([a-z_]+), *[A-Za-z_]+, *[A-Za-z_]+, *[A-Za-z_]+, *([0-9]),")
    message(FATAL_ERROR "embed.cmake: a row of ${DEF} it cannot read: ${_row}")
  endif()
  list(APPEND _keys ${CMAKE_MATCH_1})
  if(NOT CMAKE_MATCH_2 STREQUAL "0")
    list(APPEND _pipelined ${CMAKE_MATCH_1})
  endif()
endforeach()

# Fails where the object at the path (if the file has it) has a member that is not in `allowed`.
function(check_names file text what allowed)
  string(JSON _type ERROR_VARIABLE _err TYPE "${text}" ${ARGN})
  if(_err OR NOT _type STREQUAL "OBJECT")
    return()
  endif()
  string(JSON _n LENGTH "${text}" ${ARGN})
  if(_n EQUAL 0)
    return()
  endif()
  math(EXPR _last "${_n} - 1")
  foreach(_i RANGE ${_last})
    string(JSON _name MEMBER "${text}" ${ARGN} ${_i})
    list(JOIN ARGN "." _where)
    if(NOT _name IN_LIST allowed)
      # (the line first as it is: FATAL_ERROR's text is wrapped)
      message(NOTICE "${file}: ${_where}.${_name}: not ${what} of src/config/collectives.def")
      message(FATAL_ERROR "embed.cmake: a built-in model file names what collectives.def does not have")
    endif()
  endforeach()
endfunction()

foreach(_f ${OPENMPI} ${MPICH})
  file(READ ${_f} _text)
  foreach(_section flat_algorithms flat_measured hier_measured flat_measured_nonblocking hier_measured_nonblocking)
    check_names(${_f} "${_text}" "a collective" "${_keys}" ${_section})
  endforeach()
  check_names(${_f} "${_text}" "a pipelined collective (Pipelined column)" "${_pipelined}" pipeline chunk_bytes)
endforeach()

file(READ ${OPENMPI} _o)
file(READ ${MPICH} _m)
file(WRITE ${OUT} "// Generated from src/model/builtin-*.json by src/model/embed.cmake: do not edit.\n#pragma once\nnamespace hier::model {\ninline constexpr const char* kBuiltinOpenMPI = R\"libhierjson(${_o})libhierjson\";\ninline constexpr const char* kBuiltinMPICH = R\"libhierjson(${_m})libhierjson\";\n}  // namespace hier::model\n")
