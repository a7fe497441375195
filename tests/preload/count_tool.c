/* A small PMPI tool, as a profiler is one: it defines some MPI_* functions, counts the calls
 * and passes each to PMPI_*. At MPI_Finalize every rank prints one line
 *   tool rank R: MPI_Allreduce=N MPI_Bcast=N ...
 * (docs/tools.md; tests/preload/run_tools.py preloads it before and after libhier.so).
 * MPI_Barrier reaches the MPI as tools in preload mode do (Darshan): through the PMPI_Barrier
 * after this library, dlsym(RTLD_NEXT), which skips a libhier.so loaded before it. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

enum { INIT, INIT_THREAD, ALLREDUCE, BCAST, BARRIER, SEND, RECV, IALLREDUCE, WAIT, COMM_DUP, FINALIZE, N };
static const char* names[N] = {"MPI_Init", "MPI_Init_thread", "MPI_Allreduce", "MPI_Bcast", "MPI_Barrier", "MPI_Send",
                               "MPI_Recv", "MPI_Iallreduce", "MPI_Wait", "MPI_Comm_dup", "MPI_Finalize"};
static long counts[N];

int MPI_Init(int* argc, char*** argv) {
  ++counts[INIT];
  return PMPI_Init(argc, argv);
}
int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  ++counts[INIT_THREAD];
  return PMPI_Init_thread(argc, argv, required, provided);
}
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  ++counts[ALLREDUCE];
  return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  ++counts[BCAST];
  return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Barrier(MPI_Comm c) {
  ++counts[BARRIER];
  static int (*next)(MPI_Comm);
  if (!next) next = (int (*)(MPI_Comm))dlsym(RTLD_NEXT, "PMPI_Barrier");
  return next(c);
}
int MPI_Send(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  ++counts[SEND];
  return PMPI_Send(b, n, t, dest, tag, c);
}
int MPI_Recv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status* st) {
  ++counts[RECV];
  return PMPI_Recv(b, n, t, src, tag, c, st);
}
int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* req) {
  ++counts[IALLREDUCE];
  return PMPI_Iallreduce(s, r, n, t, op, c, req);
}
int MPI_Wait(MPI_Request* req, MPI_Status* st) {
  ++counts[WAIT];
  return PMPI_Wait(req, st);
}
int MPI_Comm_dup(MPI_Comm c, MPI_Comm* out) {
  ++counts[COMM_DUP];
  return PMPI_Comm_dup(c, out);
}
int MPI_Finalize(void) {
  ++counts[FINALIZE];
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char line[1024];
  int k = snprintf(line, sizeof line, "tool rank %d:", rank);
  for (int i = 0; i < N; ++i) k += snprintf(line + k, sizeof line - (size_t)k, " %s=%ld", names[i], counts[i]);
  // One write(2) of the whole line, under PIPE_BUF: the launcher forwards the ranks' pipes as
  // they come, and a line written in pieces (stdio's buffer holding the program's own lines
  // before it) was seen cut by another rank's line under MPICH's hydra.
  fflush(stdout);
  if (k > (int)sizeof line - 2) k = (int)sizeof line - 2;
  line[k++] = '\n';
  (void)!write(1, line, (size_t)k);
  return PMPI_Finalize();
}
