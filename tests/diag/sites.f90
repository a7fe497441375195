! Call sites of a Fortran program (tests/diag/run_sites.py): the hang report and the report's
! call_sites must name this file's lines (the SITE markers), not libhier's Fortran wrapper nor the
! MPI's Fortran binding. Rank 1 sleeps before the last allreduce until the driver creates the
! file named by the first argument (once the hang report is out).
program sites
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int
  implicit none
  interface
    integer(c_int) function usleep(us) bind(C, name="usleep")
      import :: c_int
      integer(c_int), value :: us
    end function
  end interface
  integer :: ierr, rank, i
  double precision :: x, y
  character(len=4096) :: wake
  logical :: there

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, wake)
  x = rank + 1
  do i = 1, 3
    call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr) ! SITE:loop
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr) ! SITE:barrier
  if (rank == 1) then
    print '(A,I0)', 'FAULT rank ', rank
    flush(6)
    do
      inquire(file=trim(wake), exist=there)
      if (there) exit
      ierr = usleep(20000_c_int)
    end do
  end if
  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr) ! SITE:hang
  print '(A,I0)', 'DONE rank ', rank
  call MPI_Finalize(ierr)
end program sites
