# Writes the built-in model files as C++ string constants (raw literals).
file(READ ${OPENMPI} _o)
file(READ ${MPICH} _m)
file(WRITE ${OUT} "// Generated from src/model/builtin-*.json by src/model/embed.cmake: do not edit.\n#pragma once\nnamespace hier::model {\ninline constexpr const char* kBuiltinOpenMPI = R\"libhierjson(${_o})libhierjson\";\ninline constexpr const char* kBuiltinMPICH = R\"libhierjson(${_m})libhierjson\";\n}  // namespace hier::model\n")
