/* One allreduce: with libhier linked in, the report written at finalize proves it ran. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("sum %d\n", sum);
  MPI_Finalize();
  return 0;
}
