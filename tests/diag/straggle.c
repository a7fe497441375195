/* Call-site timing cases (tests/diag/run_report.py). Built with -g: the report must name this
 * file's lines, found by the driver through the SITE markers.
 *   slow:     rank size-1 sleeps before every allreduce at SITE:slow (a known straggler);
 *             SITE:even is the same allreduce without a sleep.
 *   none:     the same program with no sleep: no straggler.
 *   mismatch: as none, then a bcast of 0 elements whose root is 0 on all ranks but size-1, which
 *             names itself (the MPIs return at once for 0 elements: the program ends normally,
 *             but the ranks' collective sequences on MPI_COMM_WORLD differ at the last call).
 *   extra:    as none, then rank size-1 alone makes one more bcast of 0 elements.
 * Every mode also makes a bcast whose ranks pass different (count, datatype) pairs of the same
 * type signature (2 doubles at the root, 1 pair of doubles elsewhere): legal, no mismatch. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "none";
  int rank, size, i;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int slow = size - 1;
  double x = rank + 1, y = 0, sum = 0;
  for (i = 0; i < 12; ++i) {
    if (!strcmp(mode, "slow") && rank == slow) usleep(40 * 1000);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:slow */
    sum += y;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE:even */
    sum += y;
  }
  double pair[2] = {1, 2};
  MPI_Datatype two;
  MPI_Type_contiguous(2, MPI_DOUBLE, &two);
  MPI_Type_commit(&two);
  if (rank == 0) MPI_Bcast(pair, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* 2 doubles */
  else MPI_Bcast(pair, 1, two, 0, MPI_COMM_WORLD);                  /* 1 pair of doubles */
  MPI_Type_free(&two);
  /* Erroneous, but harmless to both MPIs: a bcast of 0 elements returns at once. */
  if (!strcmp(mode, "mismatch")) MPI_Bcast(&x, 0, MPI_DOUBLE, rank == slow ? slow : 0, MPI_COMM_WORLD);
  if (!strcmp(mode, "extra") && rank == slow) MPI_Bcast(&x, 0, MPI_DOUBLE, slow, MPI_COMM_WORLD);
  if (rank == 0) printf("DONE %g\n", sum);
  MPI_Finalize();
  return 0;
}
