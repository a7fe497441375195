// The one dispatch point of the request family: the completion family (completion of libhier's own requests plugs in here).
// Every generated wrapper of the family calls dispatch_request<Fn::X>(fwd, args...), where fwd()
// forwards the call to PMPI unchanged. Features add behaviour here, for the functions they
// handle, and return passthrough(fwd) for everything they cannot do exactly.
//
// Two kinds of libhier requests meet here: packed point-to-point (dtype/requests.hpp: MPI
// requests with work after completion) and nonblocking hierarchical collectives
// (exec/request.hpp: MPI generalized requests that libhier completes when their schedule is
// done). While any of the latter is outstanding, every completion call advances them: a Test
// call advances them once, a Wait call becomes a loop of its Test call (the MPI's own, on the
// whole array, mixed or not) that advances them between tests, so that its semantics (which
// requests complete, statuses, MPI_UNDEFINED) stay the MPI's.
#pragma once

#include <sched.h>

#include <chrono>
#include <optional>
#include <tuple>

#include "core/errors.hpp"
#include "core/wrap.hpp"
#include "dtype/requests.hpp"
#include "exec/request.hpp"

namespace hier::core {

namespace request_detail {

// The Test call of each Wait call, through dtype's packed requests when there are any.
inline int test(MPI_Request* r, int* flag, MPI_Status* st) {
  if (dtype::any_owned())
    if (auto rc = dtype::test(r, flag, st)) return *rc;
  return PMPI_Test(r, flag, st);
}
inline int testall(int n, MPI_Request* r, int* flag, MPI_Status* st) {
  if (dtype::any_owned())
    if (auto rc = dtype::testall(n, r, flag, st)) return *rc;
  return PMPI_Testall(n, r, flag, st);
}
inline int testany(int n, MPI_Request* r, int* index, int* flag, MPI_Status* st) {
  if (dtype::any_owned())
    if (auto rc = dtype::testany(n, r, index, flag, st)) return *rc;
  return PMPI_Testany(n, r, index, flag, st);
}
inline int testsome(int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st) {
  if (dtype::any_owned())
    if (auto rc = dtype::testsome(n, r, outcount, indices, st)) return *rc;
  return PMPI_Testsome(n, r, outcount, indices, st);
}

// `once()` runs the Test call and returns {rc, done}; repeated with progress in between.
template <class Once>
int wait_loop(Once once) {
  const auto t0 = std::chrono::steady_clock::now();
  int rc = MPI_SUCCESS;
  for (;;) {
    exec::progress();
    bool done = false;
    rc = once(done);
    if (rc != MPI_SUCCESS || done) break;
    sched_yield();  // ranks often outnumber cores: let the peers run
  }
  exec::note_wait(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return rc;
}

inline int wait(MPI_Request* r, MPI_Status* st) {
  return wait_loop([&](bool& done) { int f = 0; const int rc = test(r, &f, st); done = f; return rc; });
}
inline int waitall(int n, MPI_Request* r, MPI_Status* st) {
  return wait_loop([&](bool& done) { int f = 0; const int rc = testall(n, r, &f, st); done = f; return rc; });
}
inline int waitany(int n, MPI_Request* r, int* index, MPI_Status* st) {
  return wait_loop([&](bool& done) { int f = 0; const int rc = testany(n, r, index, &f, st); done = f; return rc; });
}
inline int waitsome(int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st) {
  return wait_loop([&](bool& done) {
    const int rc = testsome(n, r, outcount, indices, st);
    done = *outcount != 0;  // some completed, or MPI_UNDEFINED: none active
    return rc;
  });
}

// MPI_Cancel of a collective request is an error the MPIs report themselves (measured with
// their own MPI_Iallreduce): Open MPI 4.1 MPI_ERR_REQUEST, MPICH 4.0 MPI_ERR_INTERN, through
// MPI_COMM_WORLD's error handler. libhier's requests answer the same; the request runs on.
inline int cancel_collective() {
#if defined(OMPI_MAJOR_VERSION)
  constexpr int code = MPI_ERR_REQUEST;
#else
  constexpr int code = MPI_ERR_INTERN;
#endif
  return raise_on(MPI_COMM_WORLD, code);
}

}  // namespace request_detail

template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_request(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if constexpr (B == Fn::Cancel) {
    if (exec::is_collective_request(*std::get<0>(std::make_tuple(args...))))
      return {request_detail::cancel_collective(), diag::AlgoTag::Hier};
  }
  const bool colls = exec::requests_active();
  // Fast path: no libhier-owned request exists, nothing to finish (relaxed loads).
  if (!colls && !dtype::any_owned()) return passthrough(fwd);
  if (colls) {
    std::optional<int> rc;
    if constexpr (B == Fn::Wait) rc = request_detail::wait(args...);
    else if constexpr (B == Fn::Waitall) rc = request_detail::waitall(args...);
    else if constexpr (B == Fn::Waitany) rc = request_detail::waitany(args...);
    else if constexpr (B == Fn::Waitsome) rc = request_detail::waitsome(args...);
    else exec::progress();  // Test calls, MPI_Request_free: advance once, then as usual
    if (rc) return {*rc, diag::AlgoTag::Flat};
    if (!dtype::any_owned()) return passthrough(fwd);
  }
  dtype::progress_detached();
  std::optional<int> rc;
  if constexpr (B == Fn::Wait) rc = dtype::wait(args...);
  else if constexpr (B == Fn::Test) rc = dtype::test(args...);
  else if constexpr (B == Fn::Waitall) rc = dtype::waitall(args...);
  else if constexpr (B == Fn::Testall) rc = dtype::testall(args...);
  else if constexpr (B == Fn::Waitany) rc = dtype::waitany(args...);
  else if constexpr (B == Fn::Testany) rc = dtype::testany(args...);
  else if constexpr (B == Fn::Waitsome) rc = dtype::waitsome(args...);
  else if constexpr (B == Fn::Testsome) rc = dtype::testsome(args...);
  else if constexpr (B == Fn::Request_free) rc = dtype::request_free(args...);
  // MPI_Cancel acts on the MPI's own request: completion then sees a cancelled status.
  if (!rc) return passthrough(fwd);
  return {*rc, diag::AlgoTag::Packed};
}

}  // namespace hier::core
