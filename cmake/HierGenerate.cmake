# The wrappers are generated from interposer/api.txt (one table): C wrappers per family,
# Fortran wrappers (compiled in for Open MPI only) and the Fn enum that the statistics use. The
# generator first checks src/config/collectives.def (the table of rewritten collectives) against
# api.txt and stops the build with one line where they disagree.
# Included before any component so that every target can depend on hier_generated.
set(_gen ${CMAKE_BINARY_DIR}/generated)
set(_families coll icoll p2p request dtype comm init)
set(_outputs ${_gen}/hier/fn.hpp ${_gen}/hier/coll_entry.inc)
foreach(f IN LISTS _families)
  list(APPEND _outputs ${_gen}/wrap_${f}.cpp ${_gen}/fwrap_${f}.cpp)
endforeach()
add_custom_command(
  OUTPUT ${_outputs}
  COMMAND Python3::Interpreter ${CMAKE_SOURCE_DIR}/interposer/generate.py ${CMAKE_SOURCE_DIR}/interposer/api.txt ${_gen}
          ${CMAKE_SOURCE_DIR}/src/config/collectives.def
  DEPENDS ${CMAKE_SOURCE_DIR}/interposer/generate.py ${CMAKE_SOURCE_DIR}/interposer/api.txt
          ${CMAKE_SOURCE_DIR}/src/config/collectives.def ${CMAKE_SOURCE_DIR}/tools/collectives.py
  COMMENT "Generating MPI wrappers from interposer/api.txt")
add_custom_target(hier_generated DEPENDS ${_outputs})
add_dependencies(hier_base hier_generated)

set(HIER_GENERATED_SOURCES ${_outputs})
