# Fails when README.md has more than MAX_LINES lines: the README is what a newcomer reads in five
# minutes; reference goes to docs/, history and figures by run to bench/RESULTS.md.
file(READ ${README} readme)
string(REGEX REPLACE "[^\n]" "" newlines "${readme}")
string(LENGTH "${newlines}" lines)
if(lines GREATER MAX_LINES)
  message(FATAL_ERROR "README.md has ${lines} lines, more than ${MAX_LINES}: move reference to docs/ and history to bench/RESULTS.md")
endif()
message(STATUS "README.md: ${lines} lines (at most ${MAX_LINES})")
