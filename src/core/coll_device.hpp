// Device buffers in the collectives libhier may rewrite (see exec::Context::device_to_mpi for why
// the choice is made per communicator, alike on every rank, and never from a rank's own buffers).
//
// For each rewritable collective: which user buffers it reads or writes, how many elements of
// which type, and what exec::may_rewrite is asked (the same count it asks itself).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "config/config.hpp"
#include "core/colls.hpp"
#include "device/pointer.hpp"
#include "device/stage.hpp"
#include "hier/fn.hpp"

namespace hier::core::coll_device {

struct UserBuf {
  const void** slot;  // the argument holding the pointer: staging swaps it for a host copy
  int64_t count;
  MPI_Datatype type;
  bool written;       // results land here
  int root = -1;      // >= 0: used only at that rank (the MPI ignores it elsewhere)
};

template <Fn B>
struct Tag {};

struct Shape {
  // The collective comes from the one table (core/colls.hpp): B is a row's blocking function.
  template <Fn B>
  Shape(Tag<B>, MPI_Datatype t, int64_t n_elems, MPI_Comm cm) : coll(coll_of(B)), type(t), count(n_elems), comm(cm) {
    static_assert(coll_row(B) >= 0 && kColls[coll_row(B)].blocking == B, "not a blocking form in collectives.def");
  }
  config::Coll coll;
  MPI_Datatype type;  // as exec::may_rewrite sees the call
  int64_t count;
  MPI_Comm comm;
  UserBuf buf[2] = {};
  int n = 0;

  void add(const void*& p, int64_t count_, MPI_Datatype t, bool written, int root = -1) {
    if (p != MPI_IN_PLACE && p != nullptr) buf[n++] = {&p, count_, t, written, root};
  }
  // Whether buffer i is used on this rank (asked only after may_rewrite: not on passthrough).
  bool used(int i) const;
  device::MemKind kind() const {
    device::MemKind k = device::MemKind::Host;
    if (device::runtime() == device::Runtime::None) return k;  // the common case: no query
    for (int i = 0; i < n; ++i)
      if (used(i)) k = device::worst(k, device::classify(*buf[i].slot));
    return k;
  }
};

inline int comm_size(MPI_Comm c) {
  int s = 0;
  PMPI_Comm_size(c, &s);
  return s;
}
inline int comm_rank(MPI_Comm c) {
  int r = 0;
  PMPI_Comm_rank(c, &r);
  return r;
}
inline bool Shape::used(int i) const { return buf[i].root < 0 || comm_rank(comm) == buf[i].root; }
inline int64_t sum(const int* counts, int n) {
  int64_t s = 0;
  for (int i = 0; i < n; ++i) s += counts[i];
  return s;
}
template <class P>
const void*& slot(P& p) {  // void* and const void* arguments alike
  return *static_cast<const void**>(static_cast<void*>(&p));
}

// One overload per collective, on the arguments as dispatch_coll narrowed them (lvalues, so
// that staging can swap pointers in place).
inline Shape shape(Tag<Fn::Allreduce> tag, const void*& sb, void*& rb, int& n, MPI_Datatype& t, MPI_Op&, MPI_Comm& c) {
  Shape s{tag, t, n, c};
  s.add(sb, n, t, false);
  s.add(slot(rb), n, t, true);
  return s;
}
inline Shape shape(Tag<Fn::Reduce> tag, const void*& sb, void*& rb, int& n, MPI_Datatype& t, MPI_Op&, int& root,
                   MPI_Comm& c) {
  Shape s{tag, t, n, c};
  s.add(sb, n, t, false);
  s.add(slot(rb), n, t, true, root);
  return s;
}
inline Shape shape(Tag<Fn::Bcast> tag, void*& b, int& n, MPI_Datatype& t, int&, MPI_Comm& c) {
  Shape s{tag, t, n, c};
  s.add(slot(b), n, t, true);
  return s;
}
inline Shape shape(Tag<Fn::Reduce_scatter_block> tag, const void*& sb, void*& rb, int& rc, MPI_Datatype& t, MPI_Op&,
                   MPI_Comm& c) {
  const int64_t all = int64_t{rc} * comm_size(c);
  Shape s{tag, t, all, c};
  s.add(sb, all, t, false);
  s.add(slot(rb), sb == MPI_IN_PLACE ? all : rc, t, true);
  return s;
}
inline Shape shape(Tag<Fn::Reduce_scatter> tag, const void*& sb, void*& rb, const int*& rcs, MPI_Datatype& t, MPI_Op&,
                   MPI_Comm& c) {
  const int64_t all = rcs ? sum(rcs, comm_size(c)) : 0;
  Shape s{tag, t, all, c};
  s.add(sb, all, t, false);
  s.add(slot(rb), sb == MPI_IN_PLACE ? all : rcs ? rcs[comm_rank(c)] : 0, t, true);
  return s;
}
inline Shape shape(Tag<Fn::Allgather> tag, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                   MPI_Datatype& rt, MPI_Comm& c) {
  const int64_t all = int64_t{rc} * comm_size(c);
  Shape s{tag, rt, all, c};
  s.add(sb, sc, st, false);
  s.add(slot(rb), all, rt, true);
  return s;
}
inline Shape shape(Tag<Fn::Allgatherv> tag, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, const int*& rcs,
                   const int*& displs, MPI_Datatype& rt, MPI_Comm& c) {
  const int size = comm_size(c);
  int64_t end = 0;  // the receive buffer spans up to the furthest block
  for (int i = 0; rcs && displs && i < size; ++i)
    if (rcs[i] > 0) end = std::max<int64_t>(end, int64_t{displs[i]} + rcs[i]);
  Shape s{tag, rt, rcs ? sum(rcs, size) : 0, c};
  s.add(sb, sc, st, false);
  s.add(slot(rb), end, rt, true);
  return s;
}
inline Shape shape(Tag<Fn::Alltoall> tag, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                   MPI_Datatype& rt, MPI_Comm& c) {
  const int size = comm_size(c);
  Shape s{tag, rt, int64_t{rc} * size, c};
  s.add(sb, int64_t{sc} * size, st, false);
  s.add(slot(rb), int64_t{rc} * size, rt, true);
  return s;
}

// Gather / scatter: exec::may_rewrite is asked in bytes (every rank's block has the same
// bytes, each rank knowing them from its own side: exec::gather, exec::scatter).
inline int64_t bytes_of(int n, MPI_Datatype t) {
  int size = 0;
  return t != MPI_DATATYPE_NULL && PMPI_Type_size(t, &size) == MPI_SUCCESS ? int64_t{n} * size : -1;
}
inline Shape shape(Tag<Fn::Gather> tag, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                   MPI_Datatype& rt, int& root, MPI_Comm& c) {
  const int size = comm_size(c);
  const int64_t b = sb == MPI_IN_PLACE ? bytes_of(rc, rt) : bytes_of(sc, st);
  Shape s{tag, MPI_BYTE, b < 0 ? -1 : b * size, c};
  s.add(sb, sc, st, false);
  s.add(slot(rb), int64_t{rc} * size, rt, true, root);
  return s;
}
inline Shape shape(Tag<Fn::Scatter> tag, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                   MPI_Datatype& rt, int& root, MPI_Comm& c) {
  const int size = comm_size(c);
  const int64_t b = rb == MPI_IN_PLACE ? bytes_of(sc, st) : bytes_of(rc, rt);
  Shape s{tag, MPI_BYTE, b < 0 ? -1 : b * size, c};
  s.add(sb, int64_t{sc} * size, st, false, root);
  s.add(slot(rb), rc, rt, true);
  return s;
}

// Host copies of this rank's device buffers, swapped into the arguments; copied back (the
// written ones) by finish(). For a rank with device buffers on a communicator that runs host
// schedules: the MPI is not GPU-aware, or the runtime was loaded after the agreement.
class Staged {
 public:
  explicit Staged(Shape& s) : s_(s) {
    for (int i = 0; i < s.n; ++i) {
      if (!s.used(i) || device::classify(*s.buf[i].slot) == device::MemKind::Host) continue;
      dev_[i] = *s.buf[i].slot;
      st_[i].emplace(dev_[i], s.buf[i].count, s.buf[i].type);
      if (st_[i]->rc() != MPI_SUCCESS) {
        rc_ = st_[i]->rc();
        return;
      }
      *s.buf[i].slot = st_[i]->host();
    }
  }
  int rc() const { return rc_; }
  // Copies results back and restores the user's pointers.
  int finish() {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < s_.n; ++i) {
      if (!st_[i]) continue;
      if (s_.buf[i].written && rc == MPI_SUCCESS) rc = st_[i]->copy_back(const_cast<void*>(dev_[i]));
      *s_.buf[i].slot = dev_[i];
    }
    return rc;
  }

 private:
  Shape& s_;
  const void* dev_[2] = {};
  std::optional<device::HostStage> st_[2];
  int rc_ = MPI_SUCCESS;
};

// A request that is already complete, for a nonblocking call that ran to its end on host copies
// (its staged buffers had to be copied back before returning): a generalized request, which
// MPI_Wait / MPI_Test / MPI_Request_free accept like any other.
inline int completed_request(MPI_Request* req) {
  auto query = [](void*, MPI_Status* st) {
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
  };
  auto free_fn = [](void*) { return MPI_SUCCESS; };
  auto cancel_fn = [](void*, int) { return MPI_SUCCESS; };
  int rc = PMPI_Grequest_start(query, free_fn, cancel_fn, nullptr, req);
  return rc == MPI_SUCCESS ? PMPI_Grequest_complete(*req) : rc;
}

// The MPI's own collective B on the (staged, host) arguments, for a call the planner leaves
// flat: the user's device pointers must not reach an MPI that may not take them. A nonblocking
// call completes here (its copies go back when this returns) and gets a completed request.
template <Fn B, class... Args>
int flat_on_host(MPI_Request* req, Args&... a) {
  if constexpr (false) {
  }
#define HIER_COLL(name, key, blocking, nonblocking, persistent, ...)                        \
  else if constexpr (B == Fn::blocking) {                                                   \
    if (!req) return PMPI_##blocking(a...);                                                 \
    int rc = PMPI_##nonblocking(a..., req);                                                 \
    if (rc == MPI_SUCCESS) rc = PMPI_Wait(req, MPI_STATUS_IGNORE);                          \
    return rc == MPI_SUCCESS ? completed_request(req) : rc;                                 \
  }
#include "config/collectives.def"
  else return MPI_ERR_INTERN;
}

}  // namespace hier::core::coll_device
