// The call site of an MPI call: the place in the program's own code that made it. The hang
// report, the call-site timing (the report's `call_sites`), the flight recorder and the trace
// all name a call by it; where::resolve / where::describe turn it into "file:line (function)".
//
// A C or C++ program calls libhier's wrapper itself: the site is the wrapper's return address.
// Other programs reach libhier through code of no interest to the user: libhier's own Fortran
// wrappers, the MPI's Fortran bindings (MPICH's libmpifort, Open MPI's mpi_f08 module), a Python
// binding (mpi4py), Horovod's ops library. Then the site is found by walking the stack with
// libunwind (dlopened at the first such call, RTLD_LOCAL: no new dependency of libhier.so, no
// symbol of it seen by the program) to the first frame outside those libraries and the MPI; and
// for Python, the calling thread's own innermost Python frame (outside mpi4py's files), read
// without the GIL (diag/python_site.hpp). docs/diagnostics.md ("Call sites").
#pragma once

namespace hier::diag {

// `ra`: the return address into libhier's caller (`__builtin_return_address(0)` in the
// generated wrapper). Returns an opaque site, stable for the process's lifetime: a return
// address into the program's code, or an interned Python site (a record inside libhier), or
// `ra` itself where nothing better is found (no libunwind, no frame of the program: a
// background thread of Horovod). Never fails, never calls MPI, safe from any thread.
//
// Cost: the kind of each distinct return address (program, pass-through library, Python) is
// found once (dladdr) and cached in a lock-free table: a C program's call pays one probe of it.
// A call through a pass-through library pays a libunwind walk of the stack (unw_backtrace) at
// every call (the return address into libhier is the same for every site of the program); a
// Python call pays a few loads from its thread's frame and one probe of the interned sites.
// Figures: bench/RESULTS.md ("Session 21, sites").
const void* call_site(const void* ra) noexcept;

}  // namespace hier::diag
