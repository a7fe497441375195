/* An unmodified MPI program that exercises every family libhier wraps. It prints one line per
 * check with a checksum of the result, so the run with libhier preloaded can be compared
 * line by line with the run without it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static unsigned long sum_bytes(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  unsigned long h = 1469598103934665603UL;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211UL;
  return h;
}
#define SHOW(name, buf, bytes) printf("rank %d %-28s %016lx\n", rank, name, sum_bytes(buf, bytes))

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  enum { N = 37 };
  int a[N], b[N * 16], c[N * 16];
  double d[N], e[N];
  for (int i = 0; i < N; ++i) { a[i] = rank * 1000 + i; d[i] = rank + i * 0.25; }

  MPI_Allreduce(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD); SHOW("allreduce_int_sum", b, N * sizeof(int));
  MPI_Allreduce(d, e, N, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); SHOW("allreduce_double_max", e, sizeof e);
  memcpy(b, a, sizeof a);
  MPI_Allreduce(MPI_IN_PLACE, b, N, MPI_INT, MPI_BXOR, MPI_COMM_WORLD); SHOW("allreduce_in_place", b, sizeof a);
  memset(b, 0, sizeof b);
  MPI_Reduce(a, b, N, MPI_INT, MPI_MIN, size - 1, MPI_COMM_WORLD); SHOW("reduce_min", b, sizeof a);
  memcpy(b, a, sizeof a);
  MPI_Bcast(b, N, MPI_INT, 0, MPI_COMM_WORLD); SHOW("bcast", b, sizeof a);
  MPI_Allgather(a, 3, MPI_INT, b, 3, MPI_INT, MPI_COMM_WORLD); SHOW("allgather", b, 3 * size * sizeof(int));
  /* In place: the send count and type are garbage and must not be read. */
  for (int i = 0; i < 3 * size; ++i) c[i] = (i / 3 == rank) ? a[i % 3] : -1;
  MPI_Allgather(MPI_IN_PLACE, -7, MPI_DATATYPE_NULL, c, 3, MPI_INT, MPI_COMM_WORLD);
  SHOW("allgather_in_place", c, 3 * size * sizeof(int));
  int counts[16], displs[16];
  for (int i = 0; i < size; ++i) { counts[i] = 1 + i % 3; displs[i] = i * 4; }
  memset(b, 0, sizeof b);
  MPI_Allgatherv(a, counts[rank], MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD); SHOW("allgatherv", b, 4 * size * sizeof(int));
  memset(b, 0, sizeof b);
  MPI_Gather(a, 2, MPI_INT, b, 2, MPI_INT, 0, MPI_COMM_WORLD); SHOW("gather", b, 2 * size * sizeof(int));
  memset(b, 0, sizeof b);
  MPI_Gatherv(a, counts[rank], MPI_INT, b, counts, displs, MPI_INT, 0, MPI_COMM_WORLD); SHOW("gatherv", b, 4 * size * sizeof(int));
  for (int i = 0; i < N * 4 && i < N * 16; ++i) c[i] = i * 7 + 1;
  MPI_Scatter(c, 2, MPI_INT, b, 2, MPI_INT, 0, MPI_COMM_WORLD); SHOW("scatter", b, 2 * sizeof(int));
  MPI_Scatterv(c, counts, displs, MPI_INT, b, counts[rank], MPI_INT, 0, MPI_COMM_WORLD); SHOW("scatterv", b, counts[rank] * sizeof(int));
  for (int i = 0; i < size * 2; ++i) c[i] = rank * 100 + i;
  MPI_Reduce_scatter_block(c, b, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD); SHOW("reduce_scatter_block", b, 2 * sizeof(int));
  int rcounts[16], tot = 0;
  for (int i = 0; i < size; ++i) { rcounts[i] = 1 + (i % 2); tot += rcounts[i]; }
  for (int i = 0; i < tot; ++i) c[i] = rank + i;
  MPI_Reduce_scatter(c, b, rcounts, MPI_INT, MPI_PROD, MPI_COMM_WORLD); SHOW("reduce_scatter", b, rcounts[rank] * sizeof(int));
  for (int i = 0; i < size * 2; ++i) c[i] = rank * 100 + i;
  MPI_Alltoall(c, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD); SHOW("alltoall", b, 2 * size * sizeof(int));
  int sd[16], rd[16], sc[16], rc[16];
  for (int i = 0; i < size; ++i) { sc[i] = rc[i] = 2; sd[i] = rd[i] = 2 * i; }
  MPI_Alltoallv(c, sc, sd, MPI_INT, b, rc, rd, MPI_INT, MPI_COMM_WORLD); SHOW("alltoallv", b, 2 * size * sizeof(int));
  MPI_Datatype st[16], rt[16];
  int sdb[16], rdb[16];
  for (int i = 0; i < size; ++i) { st[i] = rt[i] = MPI_INT; sdb[i] = rdb[i] = 8 * i; }
  MPI_Alltoallw(c, sc, sdb, st, b, rc, rdb, rt, MPI_COMM_WORLD); SHOW("alltoallw", b, 2 * size * sizeof(int));
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Scan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD); SHOW("scan", b, sizeof a);
  memset(b, 0, sizeof b);
  MPI_Exscan(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD); if (rank) SHOW("exscan", b, sizeof a);

  /* Nonblocking collectives and the completion family. */
  MPI_Request r[4];
  MPI_Iallreduce(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]);
  MPI_Ibcast(d, N, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r[1]);
  MPI_Ibarrier(MPI_COMM_WORLD, &r[2]);
  MPI_Waitall(3, r, MPI_STATUSES_IGNORE); SHOW("iallreduce", b, sizeof a); SHOW("ibcast", d, sizeof d);
  MPI_Iallgather(a, 1, MPI_INT, c, 1, MPI_INT, MPI_COMM_WORLD, &r[0]);
  int flag = 0;
  while (!flag) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
  SHOW("iallgather", c, size * sizeof(int));
  MPI_Ireduce_scatter_block(a, b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]);
  MPI_Wait(&r[0], MPI_STATUS_IGNORE); SHOW("ireduce_scatter_block", b, sizeof(int));

  /* Point to point: a ring, blocking and nonblocking, with status checks. */
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Status st1;
  MPI_Sendrecv(a, N, MPI_INT, right, 7, b, N, MPI_INT, left, 7, MPI_COMM_WORLD, &st1);
  int cnt = -1;
  MPI_Get_count(&st1, MPI_INT, &cnt);
  printf("rank %d sendrecv status src=%d tag=%d count=%d\n", rank, st1.MPI_SOURCE, st1.MPI_TAG, cnt); SHOW("sendrecv", b, sizeof a);
  MPI_Irecv(b, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]);
  MPI_Isend(a, N, MPI_INT, right, 9, MPI_COMM_WORLD, &r[1]);
  int idx = -1, outc = 0, idxs[2];
  MPI_Status sts[2];
  MPI_Waitany(2, r, &idx, &st1);
  MPI_Waitsome(2, r, &outc, idxs, sts);
  MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
  SHOW("isend_irecv", b, sizeof a);
  if (rank % 2 == 0 && size > 1) {
    MPI_Send(a, 5, MPI_INT, right, 3, MPI_COMM_WORLD);
  }
  if (rank % 2 == 1) {
    MPI_Probe(left, 3, MPI_COMM_WORLD, &st1);
    MPI_Recv(b, 5, MPI_INT, left, 3, MPI_COMM_WORLD, &st1);
    SHOW("send_recv", b, 5 * sizeof(int));
  }
  MPI_Irecv(b, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &r[0]);
  MPI_Cancel(&r[0]);
  MPI_Wait(&r[0], &st1);
  int cancelled = 0;
  MPI_Test_cancelled(&st1, &cancelled);
  printf("rank %d cancelled=%d\n", rank, cancelled);
  MPI_Isend(a, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &r[0]);
  MPI_Recv(b, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Request_free(&r[0]);
  int tflag = 0, tidx = -1, toutc = 0, tidxs[1];
  MPI_Irecv(b, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, &r[0]);
  MPI_Send(a, 1, MPI_INT, rank, 6, MPI_COMM_WORLD);
  do { MPI_Testany(1, r, &tidx, &tflag, MPI_STATUS_IGNORE); } while (!tflag);
  MPI_Irecv(b, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, &r[0]);
  MPI_Send(a, 1, MPI_INT, rank, 6, MPI_COMM_WORLD);
  do { MPI_Testsome(1, r, &toutc, tidxs, MPI_STATUSES_IGNORE); } while (toutc == 0);
  MPI_Irecv(b, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, &r[0]);
  MPI_Send(a, 1, MPI_INT, rank, 6, MPI_COMM_WORLD);
  tflag = 0;
  do { MPI_Testall(1, r, &tflag, MPI_STATUSES_IGNORE); } while (!tflag);
  int iflag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &iflag, MPI_STATUS_IGNORE);

  /* Datatypes and packing. */
  MPI_Datatype vec;
  MPI_Type_vector(4, 2, 5, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  char packed[256];
  int pos = 0, psize = 0;
  MPI_Pack_size(2, vec, MPI_COMM_WORLD, &psize);
  MPI_Pack(a, 2, vec, packed, sizeof packed, &pos, MPI_COMM_WORLD);
  printf("rank %d pack_size=%d position=%d\n", rank, psize, pos); SHOW("pack", packed, pos);
  memset(b, 0, sizeof b);
  pos = 0;
  MPI_Unpack(packed, sizeof packed, &pos, b, 2, vec, MPI_COMM_WORLD); SHOW("unpack", b, 20 * sizeof(int));
  MPI_Type_free(&vec);
  char packed2[256];  /* keeps `packed` alive for the large-count test below */
  (void)packed2;

  /* Communicator lifecycle. */
  MPI_Comm dup, split, created, shared;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(dup, rank % 2, -rank, &split);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
  MPI_Group g;
  MPI_Comm_group(MPI_COMM_WORLD, &g);
  MPI_Comm_create(MPI_COMM_WORLD, g, &created);
  MPI_Group_free(&g);
  int srank = -1;
  MPI_Comm_rank(split, &srank);
  MPI_Allreduce(a, b, N, MPI_INT, MPI_SUM, split); SHOW("allreduce_split", b, sizeof a);
  printf("rank %d split_rank=%d\n", rank, srank);
  /* Errors come back exactly as the MPI returns them (MPI_ERRORS_RETURN on this communicator).
   * Open MPI only: Debian's MPICH is built without argument checking and crashes on these. */
#if defined(OMPI_MAJOR_VERSION)
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int err = MPI_Allreduce(a, b, -1, MPI_INT, MPI_SUM, dup), eclass = -1;
  MPI_Error_class(err, &eclass);
  printf("rank %d allreduce_negative_count error=%d class=%d\n", rank, err != MPI_SUCCESS, eclass);
  err = MPI_Send(a, 1, MPI_INT, size + 5, 0, dup);
  MPI_Error_class(err, &eclass);
  printf("rank %d send_bad_rank error=%d class=%d\n", rank, err != MPI_SUCCESS, eclass);
#endif

  /* More MPI_IN_PLACE with garbage send arguments (must not be read). */
  for (int i = 0; i < 2 * size; ++i) c[i] = (i / 2 == rank) ? a[i % 2] : -1;
  if (rank == 0) MPI_Gather(MPI_IN_PLACE, -3, MPI_DATATYPE_NULL, c, 2, MPI_INT, 0, MPI_COMM_WORLD);
  else MPI_Gather(a, 2, MPI_INT, NULL, 0, MPI_INT, 0, MPI_COMM_WORLD);  /* recv args unused off-root */
  if (rank == 0) SHOW("gather_in_place", c, 2 * size * sizeof(int));
  for (int i = 0; i < 2 * size; ++i) c[i] = rank * 10 + i;
  MPI_Alltoall(MPI_IN_PLACE, -9, MPI_DATATYPE_NULL, c, 2, MPI_INT, MPI_COMM_WORLD);
  SHOW("alltoall_in_place", c, 2 * size * sizeof(int));

#if MPI_VERSION >= 4
  /* MPI-4 large-count variants (MPICH). */
  MPI_Allreduce_c(a, b, (MPI_Count)N, MPI_INT, MPI_SUM, MPI_COMM_WORLD); SHOW("allreduce_c", b, sizeof a);
  MPI_Count cpos = 0;
  MPI_Pack_c(a, (MPI_Count)4, MPI_INT, packed, (MPI_Count)sizeof packed, &cpos, MPI_COMM_WORLD);
  SHOW("pack_c", packed, (size_t)cpos);
#endif
  MPI_Comm_free(&created);
  MPI_Comm_free(&shared);
  MPI_Comm_free(&split);
  MPI_Comm_free(&dup);
  MPI_Finalize();
  return 0;
}
