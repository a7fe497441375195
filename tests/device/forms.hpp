// A collective's three forms in the device tests (forms_test.cpp, quant_test.cpp): blocking,
// nonblocking (MPI_I...) and persistent (MPI_..._init, MPI 4.0 libraries only).
#pragma once

#include <mpi.h>

enum class Form { Blocking, Nonblocking, Persistent };
inline const char* name_of(Form f) {
  return f == Form::Blocking ? "blocking" : f == Form::Nonblocking ? "nonblocking" : "persistent";
}

// One call's three forms, by name: MPI_X(args), MPI_Ix(args, q), MPI_X_init(args, info, q), with
// `f` (a Form) and `q` (an MPI_Request*) in scope.
#if MPI_VERSION >= 4
#define HIER_INIT(name, ...) MPI_##name##_init(__VA_ARGS__, MPI_INFO_NULL, q)
#else
#define HIER_INIT(name, ...) MPI_ERR_OTHER
#endif
#define ISSUE(name, iname, ...)                                                                  \
  (f == Form::Blocking      ? MPI_##name(__VA_ARGS__)                                                     \
   : f == Form::Nonblocking ? MPI_##iname(__VA_ARGS__, q)                                                 \
                            : HIER_INIT(name, __VA_ARGS__))
