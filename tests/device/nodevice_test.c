/* A program linked against a real GPU runtime on a machine without a device (issue 39): Debian's
 * HIP runtime answers every query with an error here (hipGetDeviceCount: hipErrorNoDevice), and a
 * ROCm build of PyTorch on a CPU partition, or a container with its GPUs masked, is in the same
 * place. Under libhier it must run exactly as without it: every buffer is host memory.
 *
 * The reproduction (blocking and nonblocking reductions, a broadcast), the program's own
 * HIP call first where NODEV_ASK_RUNTIME names the call, then the intercommunicator collectives
 * that gave wrong data (scatter, gather, allgather(v), alltoall, blocking and nonblocking, counts up
 * to 64 Ki ints). Every result is checked against values computed here; one line per rank,
 * "nodevice: ok" or the first wrong value, exit 1 on any. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_bad = 0;
static void expect(const char *what, long got, long want) {
  if (got != want && g_bad++ < 5) fprintf(stderr, "nodevice: %s: got %ld, want %ld\n", what, got, want);
}

/* The program's own use of its runtime before MPI: the call the issue names, found in the process
 * (the program is linked with the runtime, or has it preloaded). */
static void ask_runtime(void) {
  const char *fn = getenv("NODEV_ASK_RUNTIME");
  if (!fn || !*fn) return;
  int (*count)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, fn);
  if (!count) {
    fprintf(stderr, "nodevice: NODEV_ASK_RUNTIME=%s is not in the process\n", fn);
    exit(2);
  }
  int n = -1;
  const int rc = count(&n);
  printf("nodevice: %s answered %d (devices: %d)\n", fn, rc, n);
}

static void reproduction(int rank, int size) {
  int a[10], b[10];
  for (int i = 0; i < 10; i++) a[i] = rank + i;
  const int sum0 = size * (size - 1) / 2;
  MPI_Allreduce(a, b, 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < 10; i++) expect("allreduce", b[i], sum0 + size * i);
  memset(b, 0, sizeof b);
  MPI_Reduce(a, b, 10, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Bcast(b, 10, MPI_INT, 0, MPI_COMM_WORLD);
  for (int i = 0; i < 10; i++) expect("reduce+bcast", b[i], sum0 + size * i);
  MPI_Request r;
  memset(b, 0, sizeof b);
  MPI_Iallreduce(a, b, 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (int i = 0; i < 10; i++) expect("iallreduce", b[i], sum0 + size * i);
  memset(b, 0, sizeof b);
  MPI_Ireduce(a, b, 10, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  if (rank == 0)
    for (int i = 0; i < 10; i++) expect("ireduce", b[i], sum0 + size * i);
}

/* value of element i that rank `from` (of its group) sends to rank `to` */
static int val(int from, int to, int i) { return from * 1000003 + to * 7919 + i; }

static void intercomm(int rank, int size) {
  if (size < 2) return;
  MPI_Comm local, inter;
  const int color = rank % 2;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local);
  MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 7, &inter);
  int lrank, rsize;
  MPI_Comm_rank(local, &lrank);
  MPI_Comm_remote_size(inter, &rsize);
  const int counts[] = {1, 17, 65536};
  for (int c = 0; c < 3; c++) {
    const int n = counts[c];
    int *send = malloc(sizeof(int) * (size_t)n * (size_t)(rsize + 1) + sizeof(int) * 4);
    int *recv = malloc(sizeof(int) * (size_t)n * (size_t)(rsize + 1) + sizeof(int) * 4);
    for (int nb = 0; nb < 2; nb++) {
      MPI_Request r = MPI_REQUEST_NULL;
      /* allgather: every rank receives n ints from each remote rank */
      for (int i = 0; i < n; i++) send[i] = val(lrank, -1, i);
      if (nb) MPI_Iallgather(send, n, MPI_INT, recv, n, MPI_INT, inter, &r);
      else MPI_Allgather(send, n, MPI_INT, recv, n, MPI_INT, inter);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      for (int k = 0; k < rsize; k++)
        for (int i = 0; i < n; i += 1 + n / 64) expect("inter allgather", recv[k * n + i], val(k, -1, i));
      /* allgatherv with the same counts */
      int *rc = malloc(sizeof(int) * (size_t)rsize), *dis = malloc(sizeof(int) * (size_t)rsize);
      for (int k = 0; k < rsize; k++) rc[k] = n, dis[k] = k * n;
      memset(recv, 0, sizeof(int) * (size_t)n * (size_t)rsize);
      if (nb) MPI_Iallgatherv(send, n, MPI_INT, recv, rc, dis, MPI_INT, inter, &r);
      else MPI_Allgatherv(send, n, MPI_INT, recv, rc, dis, MPI_INT, inter);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      for (int k = 0; k < rsize; k++)
        for (int i = 0; i < n; i += 1 + n / 64) expect("inter allgatherv", recv[k * n + i], val(k, -1, i));
      free(rc);
      free(dis);
      /* alltoall: n ints to each remote rank */
      for (int k = 0; k < rsize; k++)
        for (int i = 0; i < n; i++) send[k * n + i] = val(lrank, k, i);
      if (nb) MPI_Ialltoall(send, n, MPI_INT, recv, n, MPI_INT, inter, &r);
      else MPI_Alltoall(send, n, MPI_INT, recv, n, MPI_INT, inter);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      for (int k = 0; k < rsize; k++)
        for (int i = 0; i < n; i += 1 + n / 64) expect("inter alltoall", recv[k * n + i], val(k, lrank, i));
      /* scatter and gather rooted at rank 0 of the even group */
      const int root_side = color == 0;
      const int root = root_side ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
      if (root == MPI_ROOT)
        for (int k = 0; k < rsize; k++)
          for (int i = 0; i < n; i++) send[k * n + i] = val(0, k, i);
      if (nb) MPI_Iscatter(send, n, MPI_INT, recv, n, MPI_INT, root, inter, &r);
      else MPI_Scatter(send, n, MPI_INT, recv, n, MPI_INT, root, inter);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      if (!root_side)
        for (int i = 0; i < n; i += 1 + n / 64) expect("inter scatter", recv[i], val(0, lrank, i));
      for (int i = 0; i < n; i++) send[i] = val(lrank, 0, i);
      if (nb) MPI_Igather(send, n, MPI_INT, recv, n, MPI_INT, root, inter, &r);
      else MPI_Gather(send, n, MPI_INT, recv, n, MPI_INT, root, inter);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      if (root == MPI_ROOT)
        for (int k = 0; k < rsize; k++)
          for (int i = 0; i < n; i += 1 + n / 64) expect("inter gather", recv[k * n + i], val(k, 0, i));
    }
    free(send);
    free(recv);
  }
  MPI_Comm_free(&inter);
  MPI_Comm_free(&local);
}

int main(int argc, char **argv) {
  ask_runtime();
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  reproduction(rank, size);
  intercomm(rank, size);
  /* after the program's own runtime call: a plain MPI_Ireduce, then MPI_Wait, on every rank */
  int x = rank + 1, y = 0;
  MPI_Request r;
  MPI_Ireduce(&x, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  if (rank == 0) expect("ireduce (last)", y, size * (size + 1) / 2);
  int bad = 0;
  MPI_Allreduce(&g_bad, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("nodevice: %s\n", bad ? "WRONG" : "ok");
  MPI_Finalize();
  return bad ? 1 : 0;
}
