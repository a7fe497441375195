// Device buffers in the collectives libhier may rewrite (see exec::Context::device_to_mpi for why
// the choice is made per communicator, alike on every rank, and never from a rank's own buffers).
//
// For each rewritable collective: which user buffers it reads or writes, how many elements of
// which type, and what exec::may_rewrite is asked (the same count it asks itself).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
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

struct Shape {
  Shape(config::Coll c, MPI_Datatype t, int64_t n_elems, MPI_Comm cm) : coll(c), type(t), count(n_elems), comm(cm) {}
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

// The Buffers column of config/collectives.def: one function per kind of argument list, on the
// arguments of the row's blocking function as dispatch_coll narrowed them (lvalues, so that
// staging can swap pointers in place); `coll` is the row's. A new row whose arguments are an
// existing kind's names that kind (MPI_Scan's would be elementwise); only a new kind of argument
// list is a new function here. shape<B>() below calls the row's, so that a row naming a kind
// whose arguments are not its blocking function's fails to compile.
namespace buffers {

// No buffers (MPI_Barrier).
inline Shape no_buffers(config::Coll coll, MPI_Comm& c) { return Shape{coll, MPI_DATATYPE_NULL, 0, c}; }
// n elements in, n out on every rank (MPI_Allreduce).
inline Shape elementwise(config::Coll coll, const void*& sb, void*& rb, int& n, MPI_Datatype& t, MPI_Op&,
                         MPI_Comm& c) {
  Shape s{coll, t, n, c};
  s.add(sb, n, t, false);
  s.add(slot(rb), n, t, true);
  return s;
}
// n elements in, n out at the root (MPI_Reduce).
inline Shape elementwise_to_root(config::Coll coll, const void*& sb, void*& rb, int& n, MPI_Datatype& t, MPI_Op&,
                                 int& root, MPI_Comm& c) {
  Shape s{coll, t, n, c};
  s.add(sb, n, t, false);
  s.add(slot(rb), n, t, true, root);
  return s;
}
// One buffer of n elements, written (MPI_Bcast: read at the root).
inline Shape one_buffer(config::Coll coll, void*& b, int& n, MPI_Datatype& t, int&, MPI_Comm& c) {
  Shape s{coll, t, n, c};
  s.add(slot(b), n, t, true);
  return s;
}
// Blocks of rc elements from every rank, one block out (MPI_Reduce_scatter_block).
inline Shape reduced_blocks(config::Coll coll, const void*& sb, void*& rb, int& rc, MPI_Datatype& t, MPI_Op&,
                            MPI_Comm& c) {
  const int64_t all = int64_t{rc} * comm_size(c);
  Shape s{coll, t, all, c};
  s.add(sb, all, t, false);
  s.add(slot(rb), sb == MPI_IN_PLACE ? all : rc, t, true);
  return s;
}
// rcs[r] elements for each rank r in, this rank's out (MPI_Reduce_scatter).
inline Shape reduced_vblocks(config::Coll coll, const void*& sb, void*& rb, const int*& rcs, MPI_Datatype& t, MPI_Op&,
                             MPI_Comm& c) {
  const int64_t all = rcs ? sum(rcs, comm_size(c)) : 0;
  Shape s{coll, t, all, c};
  s.add(sb, all, t, false);
  s.add(slot(rb), sb == MPI_IN_PLACE ? all : rcs ? rcs[comm_rank(c)] : 0, t, true);
  return s;
}
// One block in, every rank's block out (MPI_Allgather).
inline Shape blocks_to_all(config::Coll coll, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                           MPI_Datatype& rt, MPI_Comm& c) {
  const int64_t all = int64_t{rc} * comm_size(c);
  Shape s{coll, rt, all, c};
  s.add(sb, sc, st, false);
  s.add(slot(rb), all, rt, true);
  return s;
}
// One block in, every rank's block at its displacement out (MPI_Allgatherv).
inline Shape vblocks_to_all(config::Coll coll, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, const int*& rcs,
                            const int*& displs, MPI_Datatype& rt, MPI_Comm& c) {
  const int size = comm_size(c);
  int64_t end = 0;  // the receive buffer spans up to the furthest block
  for (int i = 0; rcs && displs && i < size; ++i)
    if (rcs[i] > 0) end = std::max<int64_t>(end, int64_t{displs[i]} + rcs[i]);
  Shape s{coll, rt, rcs ? sum(rcs, size) : 0, c};
  s.add(sb, sc, st, false);
  s.add(slot(rb), end, rt, true);
  return s;
}
// One block per rank in, one from each rank out (MPI_Alltoall).
inline Shape blocks_exchanged(config::Coll coll, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                              MPI_Datatype& rt, MPI_Comm& c) {
  const int size = comm_size(c);
  Shape s{coll, rt, int64_t{rc} * size, c};
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
// One block in, every rank's out at the root (MPI_Gather).
inline Shape blocks_to_root(config::Coll coll, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                            MPI_Datatype& rt, int& root, MPI_Comm& c) {
  const int size = comm_size(c);
  const int64_t b = sb == MPI_IN_PLACE ? bytes_of(rc, rt) : bytes_of(sc, st);
  Shape s{coll, MPI_BYTE, b < 0 ? -1 : b * size, c};
  s.add(sb, sc, st, false);
  s.add(slot(rb), int64_t{rc} * size, rt, true, root);
  return s;
}
// Every rank's block in at the root, one block out (MPI_Scatter).
inline Shape blocks_from_root(config::Coll coll, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, int& rc,
                              MPI_Datatype& rt, int& root, MPI_Comm& c) {
  const int size = comm_size(c);
  const int64_t b = rb == MPI_IN_PLACE ? bytes_of(sc, st) : bytes_of(rc, rt);
  Shape s{coll, MPI_BYTE, b < 0 ? -1 : b * size, c};
  s.add(sb, int64_t{sc} * size, st, false, root);
  s.add(slot(rb), rc, rt, true);
  return s;
}

}  // namespace buffers

// The buffers of a call of the row whose blocking function is B (the table's Buffers column).
template <Fn B, class... Args>
Shape shape(Args&... a) {
  if constexpr (false) {
  }
#define HIER_COLL(name, key, blocking, nonblocking, persistent, pipelined, quantized, flat, op, cartesian, any, kind, \
                  ...)                                                                                              \
  else if constexpr (B == Fn::blocking) return buffers::kind(config::Coll::name, a...);
#include "config/collectives.def"
  else static_assert(B != B, "not a blocking form in config/collectives.def");
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

// The host copies of a persistent collective's device buffers, kept with its request (exec::
// wrap_persistent): made at the init, where the schedule is bound to them; copied from the device
// again at every MPI_Start (refresh), and the written ones back once each start completed.
class PersistentStage {
 public:
  // Replaces s's device buffers by host copies (rc() says whether that worked); restore() puts the
  // user's pointers back into s.
  explicit PersistentStage(Shape& s) {
    for (int i = 0; i < s.n; ++i) {
      if (!s.used(i) || device::classify(*s.buf[i].slot) == device::MemKind::Host) continue;
      dev_[i] = *s.buf[i].slot;
      written_[i] = s.buf[i].written;
      st_[i] = std::make_unique<device::HostStage>(dev_[i], s.buf[i].count, s.buf[i].type);
      if (st_[i]->rc() != MPI_SUCCESS) {
        rc_ = st_[i]->rc();
        return;
      }
      *s.buf[i].slot = st_[i]->host();
    }
  }
  int rc() const { return rc_; }
  void restore(Shape& s) const {
    for (int i = 0; i < s.n; ++i)
      if (st_[i]) *s.buf[i].slot = dev_[i];
  }
  int refresh() {
    for (int i = 0; i < 2; ++i)
      if (st_[i])
        if (int rc = st_[i]->refresh(dev_[i]); rc != MPI_SUCCESS) return rc;
    return MPI_SUCCESS;
  }
  int copy_back() const {
    for (int i = 0; i < 2; ++i)
      if (st_[i] && written_[i])
        if (int rc = st_[i]->copy_back(const_cast<void*>(dev_[i])); rc != MPI_SUCCESS) return rc;
    return MPI_SUCCESS;
  }

 private:
  const void* dev_[2] = {};
  bool written_[2] = {};
  std::unique_ptr<device::HostStage> st_[2];
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
