#include "exec/direct.hpp"

#include <algorithm>
#include <cstring>

namespace hier::exec {

int reduce_scatter_direct(const char* src, char* dst, const std::vector<int>& counts, const TypeInfo& t, MPI_Op op,
                          MPI_Comm comm, Scratch& tmp) {
  int me = 0, p = 0;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &p);
  std::vector<int64_t> displs(p, 0);
  for (int i = 1; i < p; ++i) displs[i] = displs[i - 1] + counts[i - 1];
  const int mine = counts[me];
  // One slot per incoming piece, each laid out like the user's buffer (element 0 at slot - true_lb).
  const int64_t slot = (t.span(mine) + 63) / 64 * 64;
  char* mem = tmp.get(static_cast<size_t>(slot * (p - 1)));
  if (!mem) return MPI_ERR_NO_MEM;
  auto in = [&](int k) { return mem + (k - 1) * slot - t.true_lb; };  // piece from me-k

  std::vector<MPI_Request> req(2 * (p - 1), MPI_REQUEST_NULL);
  int rc = MPI_SUCCESS;
  for (int k = 1; k < p && rc == MPI_SUCCESS; ++k)
    rc = PMPI_Irecv(in(k), mine, t.type, (me - k + p) % p, 0, comm, &req[k - 1]);
  for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) {
    const int to = (me + k) % p;
    rc = PMPI_Isend(src + displs[to] * t.extent, counts[to], t.type, to, 0, comm, &req[p - 1 + k - 1]);
  }
  if (rc == MPI_SUCCESS) rc = typed_copy(src + displs[me] * t.extent, dst, mine, t);
  // Wait for the pieces in a fixed order and fold each in as it is complete.
  for (int k = 1; k < p && rc == MPI_SUCCESS; ++k) {
    rc = PMPI_Wait(&req[k - 1], MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && mine > 0) rc = PMPI_Reduce_local(in(k), dst, mine, t.type, op);
  }
  // Always complete what was started (also after an error), so no request outlives the call.
  const int rc_all = PMPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
  return rc != MPI_SUCCESS ? rc : rc_all;
}

int allgatherv_padded(const char* src, bool in_place, char* dst, const std::vector<int>& counts,
                      const std::vector<int>& displs, const TypeInfo* t, MPI_Comm comm, Scratch& tmp) {
  int me = 0, p = 0;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &p);
  const int maxc = *std::max_element(counts.begin(), counts.end());
  const MPI_Aint extent = t ? t->extent : 1, lb = t ? t->true_lb : 0;
  const MPI_Datatype type = t ? t->type : MPI_BYTE;
  const int64_t slot = int64_t{maxc} * extent;
  const int64_t span = t ? t->span(int64_t{maxc} * p) : slot * p;
  char* mem = tmp.get(static_cast<size_t>(span));
  if (!mem) return MPI_ERR_NO_MEM;
  char* base = mem - lb;  // element 0 of slot 0
  auto copy = [&](const char* from, char* to, int n) {
    if (t) return typed_copy(from, to, n, *t);
    if (n > 0) std::memcpy(to, from, static_cast<size_t>(n));
    return MPI_SUCCESS;
  };
  const char* mine = in_place ? dst + int64_t{displs[me]} * extent : src;
  int rc = copy(mine, base + me * slot, counts[me]);
  if (rc == MPI_SUCCESS) rc = PMPI_Allgather(MPI_IN_PLACE, 0, type, base, maxc, type, comm);
  for (int i = 0; i < p && rc == MPI_SUCCESS; ++i)
    if (i != me || !in_place) rc = copy(base + i * slot, dst + int64_t{displs[i]} * extent, counts[i]);
  return rc;
}

}  // namespace hier::exec
