// Other PMPI tools in the same process (profilers, I/O tools: Darshan, mpiP, Score-P, TAU):
// where libhier's forwarded calls go, and whether the program's MPI_* calls reach libhier at all
// (docs/tools.md).
//
// Two tables, indexed by Fn, filled once when libhier.so is loaded (dlsym(RTLD_NEXT), dladdr):
//  - g_real[f]: the PMPI_<f> after libhier.so: the MPI's own, or that of a tool loaded after
//    libhier that intercepts PMPI too. libhier's own steps and its forwarding go there.
//  - g_fwd[f]: where libhier's version of a call forwards it (the `fwd` of a wrapper): the first
//    PMPI_<f> in the process's lookup order when that is not libhier's own (an interposer of
//    PMPI only, loaded before libhier.so: the tests' stand-in GPU-aware MPI, a tool that wraps
//    PMPI alone), else g_real. A call by name from libhier would go there too; a PMPI_<f> of
//    libhier's own always goes to g_real, so that such an interposer's own forwarding (by
//    dlsym(RTLD_NEXT), which finds libhier's) reaches the MPI and cannot loop.
//  - g_tool[f]: the MPI_<f> of a tool loaded after libhier.so (null where none is): the
//    program's call is passed on to it, and the tool's PMPI_<f> comes back to libhier's
//    PMPI_<f> (generated beside each wrapper), which runs libhier's version of the call under
//    the tool (take_pending), so the tool sees each call once, with the program's arguments,
//    and its timing covers libhier's schedule.
#pragma once

#include <cstdint>

#include "base/runtime.hpp"
#include "hier/fn.hpp"

namespace hier::core {

extern void* g_real[static_cast<int>(Fn::Count)];
extern void* g_tool[static_cast<int>(Fn::Count)];
extern void* g_fwd[static_cast<int>(Fn::Count)];

// Fills both tables (once; also run when libhier.so is loaded). Returns g_real[f]; stops the
// process with one line where the MPI has no PMPI_<f> (a program of another MPI).
void* resolve_real(Fn f);

// The PMPI_<f> that libhier forwards to: one load and an indirect call.
template <class P>
inline P real(Fn f) {
  void* p = g_real[static_cast<int>(f)];
  if (__builtin_expect(p == nullptr, 0)) p = resolve_real(f);
  return reinterpret_cast<P>(p);
}

// Where libhier's version of a call forwards it unchanged (g_fwd): one load and an indirect call.
template <class P>
inline P forward(Fn f) {
  void* p = g_fwd[static_cast<int>(f)];
  if (__builtin_expect(p == nullptr, 0)) p = (resolve_real(f), g_fwd[static_cast<int>(f)]);
  return reinterpret_cast<P>(p);
}

// The next definition of MPI_<f>: a tool's, else the MPI's PMPI_<f>.
template <class P>
inline P next(Fn f) {
  void* t = g_tool[static_cast<int>(f)];
  return t ? reinterpret_cast<P>(t) : real<P>(f);
}

inline void* tool_of(Fn f) { return g_tool[static_cast<int>(f)]; }

// The call libhier has passed to a tool on this thread and expects back through PMPI_<fn>:
// fn + 1 (0: none), and the program's call site (for the call-site timing).
struct Pending {
  int fn1;
  void* site;
};
extern thread_local constinit Pending tl_pending __attribute__((tls_model("initial-exec")));

// In libhier's PMPI_<f>: the program's call site when this is the call libhier passed to the tool
// (then libhier runs its version of it), null for anything else (libhier's own steps, a tool's
// own calls, the MPI's internal ones: straight to g_real).
inline void* take_pending(Fn f) {
  if (__builtin_expect(tl_pending.fn1 != static_cast<int>(f) + 1, 1) || base::tl_depth != 0) return nullptr;
  void* site = tl_pending.site;
  tl_pending.fn1 = 0;
  return site;
}

// A tool's MPI_<f> that did not come back through libhier's PMPI_<f> (it called the MPI's
// PMPI_<f> by a pointer of its own): that call ran without libhier; counted, said once.
void tool_went_around(Fn f);

// The program's call of MPI_<f> passed on to the tool after libhier.
template <class Tool>
inline int via_tool(Fn f, void* site, Tool&& tool) {
  const Pending saved = tl_pending;
  tl_pending = {static_cast<int>(f) + 1, site};
  const int rc = tool();
  const bool around = tl_pending.fn1 == static_cast<int>(f) + 1;
  tl_pending = saved;
  if (around) tool_went_around(f);
  return rc;
}

// At libhier's initialization: one WARN line (rank 0) where another library's MPI_* come before
// libhier's (libhier bypassed for those calls), an INFO line naming the tool calls are passed
// to, and the report's "tools" section where either is the case.
void check_tool_order(int rank);

}  // namespace hier::core
