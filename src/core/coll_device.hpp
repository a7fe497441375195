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
#include "core/staged_persistent.hpp"
#include "core/wrap.hpp"
#include "device/pointer.hpp"
#include "device/runtime_copy.hpp"
#include "device/stage.hpp"
#include "dtype/requests.hpp"
#include "dtype/staging.hpp"
#include "hier/fn.hpp"

namespace hier::core::coll_device {

struct UserBuf {
  const void** slot;  // the argument holding the pointer: staging swaps it for a host copy
  int64_t count;
  MPI_Datatype type;
  bool written;       // results land here
  int root = -1;      // >= 0: used only at that rank (the MPI ignores it elsewhere)
  int64_t offset = 0; // bytes from the pointer to the staged elements' start (a Span's lo)
  // Where the buffer lives: the kind of the first byte the call touches, the staged elements' first
  // touched byte (a v-form's pointer, or one whose datatype starts after it or before it, may lie
  // outside the allocation its bytes are in). Every question about the buffer asks this.
  device::MemKind kind() const { return device::classify_typed(static_cast<const char*>(*slot) + offset, count, type); }
};

// The bytes the blocks of a v- or w-form's buffer touch, [lo, hi) from its address: block i is
// n elements of t at byte displacement disp. Staged as one copy of that span (the gaps travel
// too and go back as they were, as a derived type's holes do).
struct Span {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  void add(int64_t disp, int64_t n, MPI_Datatype t) {
    MPI_Aint lb = 0;
    const int64_t bytes = n > 0 ? device::span_bytes(t, n, &lb) : 0;
    if (bytes <= 0) return;  // nothing touched, or a type the MPI rejects (it says so itself)
    lo = std::min<int64_t>(lo, disp + lb);
    hi = std::max<int64_t>(hi, disp + lb + bytes);
  }
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
  void add(const void*& p, const Span& sp, bool written, int root = -1) {
    if (p != MPI_IN_PLACE && p != nullptr && sp.lo < sp.hi) buf[n++] = {&p, sp.hi - sp.lo, MPI_BYTE, written, root, sp.lo};
  }
  // Whether buffer i is used on this rank (asked only after may_rewrite: not on passthrough).
  bool used(int i) const;
  device::MemKind kind() const {
    device::MemKind k = device::MemKind::Host;
    if (device::runtime() == device::Runtime::None) return k;  // the common case: no query
    for (int i = 0; i < n; ++i)
      if (used(i)) k = device::worst(k, buf[i].kind());
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
// The span of blocks of counts[i] elements of t at element displacements displs[i], i < n.
inline Span vspan(const int* counts, const int* displs, MPI_Datatype t, int n) {
  Span sp;
  MPI_Aint lb = 0, extent = 0;
  if (!counts || !displs || PMPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS) return sp;
  for (int i = 0; i < n; ++i) sp.add(int64_t{displs[i]} * extent, counts[i], t);
  return sp;
}
// Blocks of rcs[i] elements from rank i at displs[i] out, at the root (MPI_Gatherv; no schedule).
inline Shape vblocks_to_root(config::Coll coll, const void*& sb, int& sc, MPI_Datatype& st, void*& rb, const int*& rcs,
                             const int*& displs, MPI_Datatype& rt, int& root, MPI_Comm& c) {
  Shape s{coll, rt, -1, c};
  s.add(sb, sc, st, false);
  if (comm_rank(c) == root) s.add(slot(rb), vspan(rcs, displs, rt, comm_size(c)), true, root);
  return s;
}
// Blocks of scs[i] elements at displs[i] in at the root, one block out (MPI_Scatterv).
inline Shape vblocks_from_root(config::Coll coll, const void*& sb, const int*& scs, const int*& displs,
                               MPI_Datatype& st, void*& rb, int& rc, MPI_Datatype& rt, int& root, MPI_Comm& c) {
  Shape s{coll, rt, -1, c};
  if (comm_rank(c) == root) s.add(sb, vspan(scs, displs, st, comm_size(c)), false, root);
  s.add(slot(rb), rc, rt, true);
  return s;
}
// A block for each rank in, one from each out, at element displacements (MPI_Alltoallv).
inline Shape vblocks_exchanged(config::Coll coll, const void*& sb, const int*& scs, const int*& sdispls,
                               MPI_Datatype& st, void*& rb, const int*& rcs, const int*& rdispls, MPI_Datatype& rt,
                               MPI_Comm& c) {
  const int size = comm_size(c);
  Shape s{coll, rt, -1, c};
  if (sb != MPI_IN_PLACE) s.add(sb, vspan(scs, sdispls, st, size), false);
  s.add(slot(rb), vspan(rcs, rdispls, rt, size), true);
  return s;
}
// The same with a type per block and byte displacements (MPI_Alltoallw).
inline Span wspan(const int* counts, const int* displs, const MPI_Datatype* types, int n) {
  Span sp;
  for (int i = 0; counts && displs && types && i < n; ++i) sp.add(displs[i], counts[i], types[i]);
  return sp;
}
inline Shape wblocks_exchanged(config::Coll coll, const void*& sb, const int*& scs, const int*& sdispls,
                               const MPI_Datatype*& sts, void*& rb, const int*& rcs, const int*& rdispls,
                               const MPI_Datatype*& rts, MPI_Comm& c) {
  const int size = comm_size(c);
  Shape s{coll, MPI_BYTE, -1, c};
  if (sb != MPI_IN_PLACE) s.add(sb, wspan(scs, sdispls, sts, size), false);
  s.add(slot(rb), wspan(rcs, rdispls, rts, size), true);
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

// The buffers of a call of a forwarded collective (core/forwarded_colls.def), B its blocking form;
// config::Coll::Count stands for "no row of collectives.def": nothing asks may_rewrite of it.
template <Fn B, class... Args>
Shape forwarded_shape(Args&... a) {
  if constexpr (false) {
  }
#define HIER_FORWARDED_COLL(blocking, nonblocking, kind, key) \
  else if constexpr (B == Fn::blocking) return buffers::kind(config::Coll::Count, a...);
#include "core/forwarded_colls.def"
  else static_assert(B != B, "not a blocking form in core/forwarded_colls.def");
}

// Host copies of this rank's device buffers (those it uses), swapped into the arguments: each
// buffer's staged elements from their first touched byte (UserBuf::offset, and the datatype's
// own lower bound inside device::HostStage), the argument pointing at the copy's element 0.
// One call's (Staged, below), or a persistent collective's, kept with its request (exec::
// wrap_persistent, or core/staged_persistent.hpp for the MPI's own): made at the init, copied
// from the device again at every MPI_Start (refresh), the written ones back once each start
// completed (copy_back).
class HostCopies {
 public:
  // Replaces s's device buffers by host copies (rc() says whether that worked); restore() puts the
  // user's pointers back into s.
  explicit HostCopies(Shape& s) {
    for (int i = 0; i < s.n; ++i) {
      const UserBuf& b = s.buf[i];
      if (!s.used(i) || b.kind() == device::MemKind::Host) continue;
      dev_[i] = at(*b.slot, b.offset);
      written_[i] = b.written;
      offset_[i] = b.offset;
      st_[i] = std::make_unique<device::HostStage>(dev_[i], b.count, b.type,
                                                   device::mpi_gpu_aware(device::runtime(), config::get().gpu_aware));
      if (st_[i]->rc() != MPI_SUCCESS) {
        rc_ = st_[i]->rc();
        st_[i].reset();
        return;
      }
      *b.slot = at(st_[i]->host(), -b.offset);
    }
  }
  int rc() const { return rc_; }
  void restore(Shape& s) const {
    for (int i = 0; i < s.n; ++i)
      if (st_[i]) *s.buf[i].slot = at(dev_[i], -offset_[i]);
  }
  // Copies the device buffers into the host copies again (a persistent collective's, at every start).
  int refresh() {
    for (int i = 0; i < 2; ++i)
      if (st_[i])
        if (int rc = st_[i]->refresh(dev_[i]); rc != MPI_SUCCESS) return rc;
    return MPI_SUCCESS;
  }
  // Copies the written buffers' host copies back to the device.
  int copy_back() const {
    for (int i = 0; i < 2; ++i)
      if (st_[i] && written_[i])
        if (int rc = st_[i]->copy_back(const_cast<void*>(dev_[i])); rc != MPI_SUCCESS) return rc;
    return MPI_SUCCESS;
  }

 private:
  static const void* at(const void* p, int64_t bytes) { return static_cast<const char*>(p) + bytes; }
  const void* dev_[2] = {};  // the staged elements' start on the device (the pointer + offset)
  bool written_[2] = {};
  int64_t offset_[2] = {};
  std::unique_ptr<device::HostStage> st_[2];
  int rc_ = MPI_SUCCESS;
};

// The host copies of one call, for a rank with device buffers on a communicator that runs host
// schedules (the MPI is not GPU-aware, or the runtime was loaded after the agreement): finish()
// copies the written ones back and restores the user's pointers; release() hands the copies to
// a request that runs on beyond the call.
class Staged {
 public:
  explicit Staged(Shape& s) : s_(s), copies_(std::make_shared<HostCopies>(s)) {}
  int rc() const { return copies_->rc(); }
  // Restores the user's pointers without copying anything back.
  void cancel() { copies_->restore(s_); }
  // Copies results back and restores the user's pointers.
  int finish() {
    const int rc = copies_->rc() == MPI_SUCCESS ? copies_->copy_back() : copies_->rc();
    copies_->restore(s_);
    return rc;
  }
  // Restores the user's pointers; the copies live on with the caller (a nonblocking request's).
  std::shared_ptr<HostCopies> release() {
    copies_->restore(s_);
    return copies_;
  }

 private:
  Shape& s_;
  std::shared_ptr<HostCopies> copies_;
};


// The MPI's own calls of collective B (its blocking form), from the two tables: the rewritten
// collectives (config/collectives.def) and the forwarded ones (core/forwarded_colls.def).
template <Fn B>
struct MpiCalls;
#if MPI_VERSION >= 4  // the persistent forms (MPI 4.0)
#define HIER_PERSISTENT_CALL(persistent) static constexpr auto persistent_call = PMPI_##persistent;
#else
#define HIER_PERSISTENT_CALL(persistent)
#endif
#define HIER_COLL(name, key, blocking, nonblocking, persistent, ...) \
  template <>                                                        \
  struct MpiCalls<Fn::blocking> {                                    \
    static constexpr auto blocking_call = PMPI_##blocking;           \
    static constexpr auto nonblocking_call = PMPI_##nonblocking;     \
    HIER_PERSISTENT_CALL(persistent)                                 \
  };
#include "config/collectives.def"
#undef HIER_PERSISTENT_CALL
#define HIER_FORWARDED_COLL(blocking, nonblocking, ...) \
  template <>                                           \
  struct MpiCalls<Fn::blocking> {                       \
    static constexpr auto blocking_call = PMPI_##blocking;       \
    static constexpr auto nonblocking_call = PMPI_##nonblocking; \
  };
#include "core/forwarded_colls.def"

// The MPI's own collective B (its blocking form) on the (staged, host) arguments.
template <Fn B, class... Args>
int flat_on_host(Args&... a) {
  return MpiCalls<B>::blocking_call(a...);
}

// The nonblocking form of B started on host copies of this rank's device buffers, which live
// until the request completes: one staging buffer holds the written buffer's span first (the
// GPU runtime copies it back when MPI_Wait / MPI_Test completes the request: dtype's owned
// requests, as for a staged MPI_Irecv) and the read buffer's after it. The user keeps the MPI's
// request, so the call stays nonblocking. Nothing on the device: the MPI's call as it is.
// Returns the MPI's outcome, or an error of libhier's own (Outcome::own: staging failed).
template <Fn B, class... Args>
Outcome start_on_copies(Shape& s, MPI_Request* req, Args&... a) {
  struct Part {
    int i;
    int64_t first;  // bytes from the user's pointer to the span's first byte
    size_t span, at;  // its length, and its place in the staging buffer
  };
  Part parts[2];
  int n = 0;
  size_t total = 0;
  for (bool written : {true, false})
    for (int i = 0; i < s.n; ++i) {
      const UserBuf& b = s.buf[i];
      if (b.written != written || !s.used(i) || b.kind() == device::MemKind::Host) continue;
      MPI_Aint lb = 0;
      const int64_t span = device::span_bytes(b.type, b.count, &lb);
      if (span < 0) return own_error(MPI_ERR_TYPE);
      if (span == 0) continue;
      parts[n++] = {i, b.offset + lb, static_cast<size_t>(span), total};
      total += static_cast<size_t>(span);
    }
  if (n == 0) return {MpiCalls<B>::nonblocking_call(a..., req), diag::AlgoTag::Flat};
  dtype::Staging st = dtype::stage_acquire(total);
  if (!st.p) return own_error(MPI_ERR_NO_MEM);
  const void* user[2] = {};
  for (int k = 0; k < n; ++k) {
    const Part& pt = parts[k];
    user[k] = *s.buf[pt.i].slot;
    if (!device::runtime_copy(st.p + pt.at, static_cast<const char*>(user[k]) + pt.first, pt.span)) {
      for (int j = 0; j < k; ++j) *s.buf[parts[j].i].slot = user[j];
      dtype::stage_release(st);
      return own_error(MPI_ERR_OTHER);
    }
    *s.buf[pt.i].slot = st.p + pt.at - pt.first;  // the host copy's element 0
  }
  const int rc = MpiCalls<B>::nonblocking_call(a..., req);
  for (int k = 0; k < n; ++k) *s.buf[parts[k].i].slot = user[k];
  const Part& w = parts[0];
  if (rc != MPI_SUCCESS) dtype::stage_release(st);
  else if (s.buf[w.i].written) dtype::own_device_recv(*req, st, static_cast<char*>(const_cast<void*>(user[0])) + w.first, w.span);
  else dtype::own_send(*req, st);
  return {rc, diag::AlgoTag::Flat};
}

// Whether the MPI has a persistent form of B that libhier wraps (MPI 4.0; the rewritten collectives).
template <Fn B>
constexpr bool kMpiPersistent = requires { MpiCalls<B>::persistent_call; };

// The MPI's own persistent form of B (MPI_<X>_init) on host copies of this rank's device buffers,
// kept with the MPI's request (core/staged_persistent.hpp): copied from the device again at every
// MPI_Start, the written ones copied back when a completion call completes that start. The
// program holds the MPI's request. Nothing on the device: the MPI's call as it is.
template <Fn B, class... Args>
Outcome persistent_on_copies(Shape& s, MPI_Info info, MPI_Request* req, Args&... a) {
  if constexpr (kMpiPersistent<B>) {
    auto copies = std::make_shared<HostCopies>(s);
    if (copies->rc() != MPI_SUCCESS) {
      copies->restore(s);
      return own_error(copies->rc());
    }
    const int rc = MpiCalls<B>::persistent_call(a..., info, req);
    copies->restore(s);
    if (rc == MPI_SUCCESS)
      staged_persistent::keep(*req, [copies] { return copies->refresh(); }, [copies] { return copies->copy_back(); });
    return {rc, diag::AlgoTag::Flat};
  } else {
    return own_error(MPI_ERR_INTERN);  // not reached: libhier wraps no persistent form of B
  }
}

}  // namespace hier::core::coll_device
