#include "exec/direct.hpp"

#include <algorithm>
#include <cstring>

namespace hier::exec {

int Pending::complete() {
  int rc = finish ? finish(*this) : MPI_SUCCESS;
  if (shm) {
    const int rc_shm = shm::finish(*shm);
    shm.reset();
    if (rc == MPI_SUCCESS) rc = rc_shm;
  }
  finish = nullptr;
  const int rc_all = reqs.empty() ? MPI_SUCCESS
                                  : PMPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  return rc != MPI_SUCCESS ? rc : rc_all;
}

namespace {
// One slot per incoming piece, each laid out like the user's buffer (element 0 at slot - true_lb).
int64_t piece_slot(int mine, const TypeInfo& t) { return (t.span(mine) + 63) / 64 * 64; }
}  // namespace

int64_t reduce_scatter_direct_bytes(const std::vector<int>& counts, int me, const TypeInfo& t) {
  return piece_slot(counts[me], t) * (static_cast<int64_t>(counts.size()) - 1);
}

int reduce_scatter_direct_start(const char* src, char* dst, const std::vector<int>& counts, const TypeInfo& t,
                                MPI_Op op, MPI_Comm comm, Scratch& tmp, Pending& out, const DeviceOps* dev) {
  int me = 0, p = 0;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &p);
  std::vector<int64_t> displs(p, 0);
  for (int i = 1; i < p; ++i) displs[i] = displs[i - 1] + counts[i - 1];
  const int mine = counts[me];
  const int64_t slot = piece_slot(mine, t);
  char* mem = tmp.get(static_cast<size_t>(reduce_scatter_direct_bytes(counts, me, t)));
  if (!mem) return MPI_ERR_NO_MEM;
  auto in = [mem, slot, lb = t.true_lb](int k) { return mem + (k - 1) * slot - lb; };  // piece from me-k

  out.reqs.assign(2 * (p - 1), MPI_REQUEST_NULL);
  int rc = MPI_SUCCESS;
  for (int k = 1; k < p && rc == MPI_SUCCESS; ++k)
    rc = PMPI_Irecv(in(k), mine, t.type, (me - k + p) % p, 0, comm, &out.reqs[k - 1]);
  for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) {
    const int to = (me + k) % p;
    rc = PMPI_Isend(src + displs[to] * t.extent, counts[to], t.type, to, 0, comm, &out.reqs[p - 1 + k - 1]);
  }
  if (rc == MPI_SUCCESS)
    rc = dev ? dev->copy(dst, src + displs[me] * t.extent, int64_t{mine} * t.size)
             : typed_copy(src + displs[me] * t.extent, dst, mine, t);
  if (rc != MPI_SUCCESS) return rc;
  // Wait for the pieces in a fixed order and fold each in as it is complete (on the device: the
  // kernels queued in that order on one stream, done before the step completes).
  out.finish = [in, dst, mine, p, type = t.type, op, dev](Pending& pd) {
    int r = MPI_SUCCESS;
    for (int k = 1; k < p && r == MPI_SUCCESS; ++k) {
      r = PMPI_Wait(&pd.reqs[k - 1], MPI_STATUS_IGNORE);
      if (r == MPI_SUCCESS && mine > 0)
        r = dev ? dev->reduce(in(k), dst, mine, type, op) : reduce_local(in(k), dst, mine, type, op);
    }
    const int synced = dev ? dev->sync() : MPI_SUCCESS;
    return r != MPI_SUCCESS ? r : synced;
  };
  return MPI_SUCCESS;
}

int reduce_scatter_direct(const char* src, char* dst, const std::vector<int>& counts, const TypeInfo& t, MPI_Op op,
                          MPI_Comm comm, Scratch& tmp, const DeviceOps* dev) {
  Pending pd;
  const int rc = reduce_scatter_direct_start(src, dst, counts, t, op, comm, tmp, pd, dev);
  const int rc_done = pd.complete();
  return rc != MPI_SUCCESS ? rc : rc_done;
}

namespace {
int copy_units(const char* from, char* to, int n, const TypeInfo* t, const DeviceOps* dev) {
  if (dev) return dev->copy(to, from, int64_t{n} * (t ? t->size : 1));  // (dense types only)
  if (t) return typed_copy(from, to, n, *t);
  if (n > 0) std::memcpy(to, from, static_cast<size_t>(n));
  return MPI_SUCCESS;
}
}  // namespace

int64_t allgatherv_padded_bytes(const std::vector<int>& counts, const TypeInfo* t) {
  const int64_t maxc = *std::max_element(counts.begin(), counts.end());
  const int64_t p = static_cast<int64_t>(counts.size());
  return t ? t->span(maxc * p) : maxc * p;
}

namespace {
// blocking: the MPI's blocking Allgather (tuned apart from its nonblocking one); the pieces are
// then copied out by out.complete().
int padded_start(const char* src, bool in_place, char* dst, const std::vector<int>& counts,
                 const std::vector<int>& displs, const TypeInfo* t, MPI_Comm comm, Scratch& tmp, Pending& out,
                 bool blocking, const DeviceOps* dev) {
  int me = 0, p = 0;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &p);
  const int maxc = *std::max_element(counts.begin(), counts.end());
  const MPI_Aint extent = t ? t->extent : 1, lb = t ? t->true_lb : 0;
  const MPI_Datatype type = t ? t->type : MPI_BYTE;
  const int64_t slot = int64_t{maxc} * extent;
  char* mem = tmp.get(static_cast<size_t>(allgatherv_padded_bytes(counts, t)));
  if (!mem) return MPI_ERR_NO_MEM;
  char* base = mem - lb;  // element 0 of slot 0
  const char* mine = in_place ? dst + int64_t{displs[me]} * extent : src;
  int rc = copy_units(mine, base + me * slot, counts[me], t, dev);
  if (rc == MPI_SUCCESS && dev) rc = dev->sync();  // the MPI reads my piece
  if (rc == MPI_SUCCESS && blocking) rc = PMPI_Allgather(MPI_IN_PLACE, 0, type, base, maxc, type, comm);
  if (rc == MPI_SUCCESS && !blocking) {
    out.reqs.assign(1, MPI_REQUEST_NULL);
    rc = PMPI_Iallgather(MPI_IN_PLACE, 0, type, base, maxc, type, comm, &out.reqs[0]);
  }
  if (rc != MPI_SUCCESS) return rc;
  out.counts = counts;
  out.displs = displs;
  out.finish = [base, slot, extent, dst, me, p, in_place, t, dev](Pending& pd) {
    int r = pd.reqs.empty() ? MPI_SUCCESS : PMPI_Wait(&pd.reqs[0], MPI_STATUS_IGNORE);
    for (int i = 0; i < p && r == MPI_SUCCESS; ++i)
      if (i != me || !in_place)
        r = copy_units(base + i * slot, dst + int64_t{pd.displs[i]} * extent, pd.counts[i], t, dev);
    const int synced = dev ? dev->sync() : MPI_SUCCESS;
    return r != MPI_SUCCESS ? r : synced;
  };
  return MPI_SUCCESS;
}

}  // namespace

int allgatherv_padded_start(const char* src, bool in_place, char* dst, const std::vector<int>& counts,
                            const std::vector<int>& displs, const TypeInfo* t, MPI_Comm comm, Scratch& tmp,
                            Pending& out, const DeviceOps* dev) {
  return padded_start(src, in_place, dst, counts, displs, t, comm, tmp, out, false, dev);
}

int allgatherv_padded(const char* src, bool in_place, char* dst, const std::vector<int>& counts,
                      const std::vector<int>& displs, const TypeInfo* t, MPI_Comm comm, Scratch& tmp,
                      const DeviceOps* dev) {
  Pending pd;
  const int rc = padded_start(src, in_place, dst, counts, displs, t, comm, tmp, pd, true, dev);
  const int rc_done = pd.complete();
  return rc != MPI_SUCCESS ? rc : rc_done;
}

}  // namespace hier::exec
