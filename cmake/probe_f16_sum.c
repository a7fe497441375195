/* Configure-time probe (cmake/HierMPI.cmake, HIER_MPI_REDUCES_F16) and test
 * (unit.mpi_f16_sum_probe): can this MPI reduce MPIX_C_FLOAT16 with MPI_SUM? Exit 0: yes, the
 * sum is right; 2: no such type (Open MPI 4.1); anything else (MPICH 4.0.2 aborts inside
 * MPI_Reduce_local, "Assertion failed in typerep_yaksa_pack.c": yaksa has no mapping for the
 * type, pmodels/mpich#7342): no. libhier quantizes MPIX_C_FLOAT16 reductions only where this
 * says yes, so that a quantized call never succeeds where the exact one (the MPI alone) fails. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
#ifndef MPIX_C_FLOAT16
  (void)argc;
  (void)argv;
  puts("no MPIX_C_FLOAT16");
  return 2;
#else
  _Float16 in[4] = {1.5f16, -2.0f16, 0.25f16, 1000.0f16};
  _Float16 io[4] = {0.5f16, 3.0f16, 0.5f16, 24.0f16};
  const float want[4] = {2.0f, 1.0f, 0.75f, 1024.0f};
  int ok = 1, i;
  MPI_Init(&argc, &argv);
  if (MPI_Reduce_local(in, io, 4, MPIX_C_FLOAT16, MPI_SUM) != MPI_SUCCESS) ok = 0;
  for (i = 0; i < 4; ++i)
    if ((float)io[i] != want[i]) ok = 0;
  MPI_Finalize();
  puts(ok ? "MPI_SUM on MPIX_C_FLOAT16: yes" : "MPI_SUM on MPIX_C_FLOAT16: wrong result");
  return ok ? 0 : 1;
#endif
}
