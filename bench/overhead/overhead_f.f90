! Time per 8-byte MPI_Allreduce on MPI_COMM_SELF from Fortran (`use mpi`), the median of blocks
! timed with this thread's CPU time. Run with libhier preloaded, once with HIER_REPORT set and once
! without: the difference is the call-site timing plus, from Fortran, the walk to the program's
! frame (diag/call_site.hpp); bench/overhead's C figure with and without HIER_REPORT is the same
! timing without the walk. Usage: overhead_f [iterations per block] [blocks]
program overhead_f
  use mpi
  implicit none
  integer :: ierr, iters, blocks, b, i, k
  double precision :: x, y, t0, t1
  double precision, allocatable :: per(:)
  character(len=32) :: arg

  call MPI_Init(ierr)
  iters = 20000
  blocks = 21
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) iters
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) blocks
  end if
  allocate (per(blocks))
  x = 1
  do b = 1, blocks
    call cpu_time(t0)
    do i = 1, iters
      call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_SELF, ierr)
    end do
    call cpu_time(t1)
    per(b) = (t1 - t0) / iters * 1d9
  end do
  do b = 2, blocks  ! insertion sort: the median
    x = per(b)
    k = b - 1
    do while (k >= 1)
      if (per(k) <= x) exit
      per(k + 1) = per(k)
      k = k - 1
    end do
    per(k + 1) = x
  end do
  print '(A,F8.1,A)', 'Fortran MPI_Allreduce(8 bytes, MPI_COMM_SELF): ', per((blocks + 1) / 2), ' ns per call (median)'
  call MPI_Finalize(ierr)
end program overhead_f
