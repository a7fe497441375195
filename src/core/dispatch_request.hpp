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

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>
#include <vector>

#include "core/errors.hpp"
#include "core/staged_persistent.hpp"
#include "core/wrap.hpp"
#include "dtype/requests.hpp"
#include "exec/own_progress.hpp"
#include "exec/request.hpp"

namespace hier::core {

namespace request_detail {

// The Test calls, through dtype's packed requests when there are any, on the array with
// started persistent collectives swapped for their current generalized requests.
template <class Call>
int swapped(int n, MPI_Request* r, Call call) {
  std::vector<MPI_Request> tmp;
  MPI_Request* a = exec::swap_in(n, r, tmp);
  const int rc = call(a);
  exec::swap_out(n, r, tmp);
  return rc;
}
inline int test(MPI_Request* r, int* flag, MPI_Status* st) {
  return swapped(1, r, [&](MPI_Request* a) {
    if (dtype::any_owned())
      if (auto rc = dtype::test(a, flag, st)) return *rc;
    return PMPI_Test(a, flag, st);
  });
}
inline int testall(int n, MPI_Request* r, int* flag, MPI_Status* st) {
  return swapped(n, r, [&](MPI_Request* a) {
    if (dtype::any_owned())
      if (auto rc = dtype::testall(n, a, flag, st)) return *rc;
    return PMPI_Testall(n, a, flag, st);
  });
}
inline int testany(int n, MPI_Request* r, int* index, int* flag, MPI_Status* st) {
  return swapped(n, r, [&](MPI_Request* a) {
    if (dtype::any_owned())
      if (auto rc = dtype::testany(n, a, index, flag, st)) return *rc;
    return PMPI_Testany(n, a, index, flag, st);
  });
}
inline int testsome(int n, MPI_Request* r, int* outcount, int* indices, MPI_Status* st) {
  return swapped(n, r, [&](MPI_Request* a) {
    if (dtype::any_owned())
      if (auto rc = dtype::testsome(n, a, outcount, indices, st)) return *rc;
    return PMPI_Testsome(n, a, outcount, indices, st);
  });
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

// Until none of r[0..n) is a libhier request whose schedule still runs.
inline void finish_ours(int n, MPI_Request* r) {
  wait_loop([&](bool& done) {
    std::vector<MPI_Request> tmp;
    done = !exec::unfinished(n, exec::swap_in(n, r, tmp));
    return MPI_SUCCESS;
  });
}
// The program's own requests r[0..n) (made by a blocking point-to-point call: core/dispatch_p2p.hpp)
// completed while libhier's requests advance, so that a rank blocked there still plays its part
// in the collectives its peers wait for; once no request of libhier's is left, the MPI's wait.
// n is 1 or 2 (statuses: st[0..n)).
inline int complete_progressing(int n, MPI_Request* r, MPI_Status* st) {
  while (exec::calls_must_progress()) {
    exec::progress();
    int flag = 0;
    const int rc = n == 1 ? test(r, &flag, st) : testall(n, r, &flag, st);
    if (rc != MPI_SUCCESS || flag) return rc;
    sched_yield();  // ranks often outnumber cores: let the peers run
  }
  if (dtype::any_owned())
    if (auto rc = n == 1 ? dtype::wait(r, st) : dtype::waitall(n, r, st)) return *rc;
  return n == 1 ? PMPI_Wait(r, st) : PMPI_Waitall(n, r, st);
}

// MPI_Wait on one of libhier's requests, and MPI_Waitall: libhier's requests are finished first,
// then the MPI's own wait takes the array (MPICH 4.0.2's MPI_Testall fails on its own started
// persistent collectives, so a Testall loop would break programs that use them).
inline int wait(MPI_Request* r, MPI_Status* st) {
  std::vector<MPI_Request> tmp;
  if (exec::unfinished(1, exec::swap_in(1, r, tmp))) {
    finish_ours(1, r);
    return swapped(1, r, [&](MPI_Request* a) {
      if (dtype::any_owned())
        if (auto rc = dtype::wait(a, st)) return *rc;
      return PMPI_Wait(a, st);
    });
  }
  return wait_loop([&](bool& done) { int f = 0; const int rc = test(r, &f, st); done = f; return rc; });
}
inline int waitall(int n, MPI_Request* r, MPI_Status* st) {
  finish_ours(n, r);
  return swapped(n, r, [&](MPI_Request* a) {
    if (dtype::any_owned())
      if (auto rc = dtype::waitall(n, a, st)) return *rc;
    return PMPI_Waitall(n, a, st);
  });
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

// MPI_Request_free of a nonblocking collective request is erroneous in MPI, and the MPIs report
// it themselves (measured with their own MPI_Iallreduce and MPI_Ibarrier): MPICH 4.0
// MPI_ERR_OTHER, complete or not; Open MPI 4.1 MPI_ERR_REQUEST while it is not complete (a
// complete one it frees); through MPI_COMM_WORLD's error handler, the handle left as it was.
// libhier's requests answer the same: the request runs on, and the program completes it as
// usual. nullopt: the MPI frees it (Open MPI, complete).
inline std::optional<int> free_collective(MPI_Request* r) {
#if defined(OMPI_MAJOR_VERSION)
  exec::progress();
  if (!exec::unfinished(1, r)) return std::nullopt;
  return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST);
#else
  (void)r;
  return raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER);
#endif
}

// MPI_Start / MPI_Startall: libhier's persistent collectives start their schedule; the MPI's own
// on host copies of device buffers refresh their copies first (core/staged_persistent.hpp).
inline int start_one(MPI_Request* r) {
  if (exec::is_persistent(*r)) return exec::start_persistent(*r);
  return staged_persistent::any() ? staged_persistent::start(r) : PMPI_Start(r);
}
inline int start(MPI_Request* r) {
  exec::progress();
  return start_one(r);
}
inline int startall(int n, MPI_Request* r) {
  exec::progress();
  for (int i = 0; i < n; ++i)
    if (int rc = start_one(&r[i]); rc != MPI_SUCCESS) return rc;
  return MPI_SUCCESS;
}

// After completion call B on the handles `before` (r's slots ahead of the call): the kept
// persistent collectives (core/staged_persistent.hpp) whose start it completed copy their
// results back. A persistent handle stays as it was, so which slots completed is read from the
// call's outputs: all of them (Wait, Waitall; Test, Testall when flag), one index (Waitany,
// Testany), or the indices (Waitsome, Testsome). An error leaves that request's results
// undefined: nothing goes back then. MPI_ERR_IN_STATUS (the array calls) says request by request
// in the statuses: MPI_SUCCESS went well (its results go back), MPI_ERR_PENDING is still running
// (it stays started, for a later completion call), anything else failed.
template <Fn B, class... Args>
void settle_kept(const std::vector<MPI_Request>& before, int rc, Args... args) {
  auto a = std::make_tuple(args...);
  // The statuses argument of the array calls (null for the others, and MPI_STATUSES_IGNORE).
  MPI_Status* statuses = nullptr;
  if constexpr (B == Fn::Waitall) statuses = std::get<2>(a);
  else if constexpr (B == Fn::Testall || B == Fn::Waitsome || B == Fn::Testsome) statuses = std::get<B == Fn::Testall ? 3 : 4>(a);
  const bool per_request = rc == MPI_ERR_IN_STATUS && statuses && statuses != MPI_STATUSES_IGNORE;
  // slot: the request's index in `before`; k: its status's index (the same, but for *some).
  auto settle = [&](int slot, int k) {
    if (slot < 0 || slot == MPI_UNDEFINED || slot >= static_cast<int>(before.size())) return;
    const int err = per_request ? statuses[k].MPI_ERROR : rc;
    if (err != MPI_ERR_PENDING) staged_persistent::completed(before[slot], err == MPI_SUCCESS);
  };
  auto all = [&] {
    for (int i = 0; i < static_cast<int>(before.size()); ++i) settle(i, i);
  };
  if constexpr (B == Fn::Wait || B == Fn::Waitall) all();
  else if constexpr (B == Fn::Test) { if (*std::get<1>(a)) all(); }
  else if constexpr (B == Fn::Testall) { if (*std::get<2>(a) || per_request) all(); }
  else if constexpr (B == Fn::Waitany) settle(*std::get<2>(a), 0);
  else if constexpr (B == Fn::Testany) { if (*std::get<3>(a)) settle(*std::get<2>(a), 0); }
  else if constexpr (B == Fn::Waitsome || B == Fn::Testsome) {
    const int out = *std::get<2>(a);
    for (int k = 0; out != MPI_UNDEFINED && k < out; ++k) settle(std::get<3>(a)[k], k);
  }
}
// The handles a completion call B takes: its request array, or its one request.
template <Fn B, class... Args>
std::vector<MPI_Request> handles_of(Args... args) {
  auto a = std::make_tuple(args...);
  if constexpr (B == Fn::Wait || B == Fn::Test) return {*std::get<0>(a)};
  else if constexpr (B == Fn::Waitall || B == Fn::Testall || B == Fn::Waitany || B == Fn::Testany ||
                     B == Fn::Waitsome || B == Fn::Testsome)
    return std::vector<MPI_Request>(std::get<1>(a), std::get<1>(a) + std::max(std::get<0>(a), 0));
  else return {};
}

}  // namespace request_detail

namespace request_detail {
template <Fn B, class Fwd, class... Args>
Outcome complete(Fwd& fwd, Args... args);
}

namespace request_detail {
template <Fn F, class Fwd, class... Args>
Outcome dispatch(Fwd& fwd, Args... args);
// The request slots a completion call (or MPI_Request_free) may null: {first, count}.
template <Fn B, class... Args>
std::pair<MPI_Request*, int> slots_of(Args... args) {
  auto a = std::make_tuple(args...);
  if constexpr (B == Fn::Wait || B == Fn::Test || B == Fn::Request_free) return {std::get<0>(a), 1};
  else if constexpr (B == Fn::Waitall || B == Fn::Testall || B == Fn::Waitany || B == Fn::Testany ||
                     B == Fn::Waitsome || B == Fn::Testsome)
    return {std::get<1>(a), std::max(std::get<0>(a), 0)};
  else return {nullptr, 0};
}
}  // namespace request_detail

// The request family. Where the progress thread advances the MPI's own nonblocking collectives
// (exec/own_progress.hpp), the handles a call completes or frees stop being advanced, and a
// blocking completion call (which progresses them itself) pauses it.
template <Fn F, class Fwd, class... Args>
inline Outcome dispatch_request(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if (!exec::own_progress::any()) return request_detail::dispatch<F>(fwd, args...);
  const auto [slots, n] = request_detail::slots_of<B>(args...);
  const std::vector<MPI_Request> before(slots, slots + n);
  std::optional<exec::own_progress::Waiting> waiting;
  if constexpr (B == Fn::Wait || B == Fn::Waitall || B == Fn::Waitany || B == Fn::Waitsome) waiting.emplace();
  const Outcome o = request_detail::dispatch<F>(fwd, args...);
  if (n > 0) exec::own_progress::settle(before, slots, n);
  return o;
}

template <Fn F, class Fwd, class... Args>
inline Outcome request_detail::dispatch(Fwd& fwd, Args... args) {
  constexpr Fn B = base_of(F);
  if constexpr (B == Fn::Start) return {request_detail::start(args...), diag::AlgoTag::Flat};
  if constexpr (B == Fn::Startall) return {request_detail::startall(args...), diag::AlgoTag::Flat};
  if constexpr (B == Fn::Cancel || B == Fn::Request_free) {
    MPI_Request* r = std::get<0>(std::make_tuple(args...));
    if (exec::is_persistent(*r)) {
      if constexpr (B == Fn::Request_free) return {exec::free_persistent(r), diag::AlgoTag::Hier};
      else return {request_detail::cancel_collective(), diag::AlgoTag::Hier};
    }
    if constexpr (B == Fn::Request_free)
      if (staged_persistent::kept(*r)) return {staged_persistent::free(r), diag::AlgoTag::Flat};
    if constexpr (B == Fn::Cancel)
      if (exec::is_collective_request(*r)) return {request_detail::cancel_collective(), diag::AlgoTag::Hier};
    if constexpr (B == Fn::Request_free)
      if (exec::is_collective_request(*r))
        if (auto rc = request_detail::free_collective(r)) return {*rc, diag::AlgoTag::Hier};
  }
  // The MPI's own persistent collectives on host copies (relaxed load): their results go back
  // once the completion call returned.
  if (!staged_persistent::any()) return request_detail::complete<B>(fwd, args...);
  staged_persistent::progress_freed();
  const std::vector<MPI_Request> before = request_detail::handles_of<B>(args...);
  const Outcome o = request_detail::complete<B>(fwd, args...);
  request_detail::settle_kept<B>(before, o.rc, args...);
  return o;
}

namespace request_detail {
// The completion family, once MPI_Start, MPI_Cancel and MPI_Request_free of libhier's own
// persistent requests were taken care of.
template <Fn B, class Fwd, class... Args>
Outcome complete(Fwd& fwd, Args... args) {
  const bool colls = exec::requests_active() || exec::persistent_started();
  // Fast path: no libhier-owned request exists, nothing to finish (relaxed loads).
  if (!colls && !dtype::any_owned()) return passthrough(fwd);
  if (colls) {
    std::optional<int> rc;
    if constexpr (B == Fn::Wait) rc = request_detail::wait(args...);
    else if constexpr (B == Fn::Waitall) rc = request_detail::waitall(args...);
    else if constexpr (B == Fn::Waitany) rc = request_detail::waitany(args...);
    else if constexpr (B == Fn::Waitsome) rc = request_detail::waitsome(args...);
    else if constexpr (B == Fn::Test || B == Fn::Testall || B == Fn::Testany || B == Fn::Testsome) {
      exec::progress();  // advance once, then the MPI's test on the swapped array
      if constexpr (B == Fn::Test) rc = request_detail::test(args...);
      else if constexpr (B == Fn::Testall) rc = request_detail::testall(args...);
      else if constexpr (B == Fn::Testany) rc = request_detail::testany(args...);
      else rc = request_detail::testsome(args...);
    } else {
      exec::progress();  // MPI_Request_free, MPI_Cancel: advance once, then as usual
    }
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
}  // namespace request_detail

}  // namespace hier::core
