! An unmodified Fortran MPI program, compiled three times: with mpif.h (BIND_MPIFH), `use mpi`
! (BIND_USEMPI) and `use mpi_f08` (BIND_F08). It prints one line per check so that the run with
! libhier preloaded can be compared with the run without it; MPI_IN_PLACE is exercised because
! Fortran's MPI_IN_PLACE is an address that the wrappers must translate.
program f_calls
#if defined(BIND_F08)
  use mpi_f08
#elif defined(BIND_USEMPI)
  use mpi
#endif
  implicit none
#if defined(BIND_MPIFH)
  include 'mpif.h'
#endif
#if defined(BIND_F08)
  type(MPI_Request) :: req(2)
  type(MPI_Status) :: st(2), st1
  type(MPI_Comm) :: dup
  type(MPI_Datatype) :: vec
#else
  integer :: req(2), st(MPI_STATUS_SIZE, 2), st1(MPI_STATUS_SIZE)
  integer :: dup, vec
#endif
  integer :: rank, nproc, ierr, i, right, left, cnt
  integer :: a(11), b(11), g(64)
  double precision :: d(5)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  do i = 1, 11
    a(i) = rank * 100 + i
  end do
  d = rank + 0.5d0

  call MPI_Allreduce(a, b, 11, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (*, '(a,i0,a,11i8)') 'rank ', rank, ' allreduce ', b
  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b, 11, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  write (*, '(a,i0,a,11i8)') 'rank ', rank, ' allreduce_in_place ', b
  call MPI_Allreduce(MPI_IN_PLACE, d, 5, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (*, '(a,i0,a,5f10.3)') 'rank ', rank, ' allreduce_double ', d
  b = a
  if (rank == 0) then
    call MPI_Reduce(MPI_IN_PLACE, b, 11, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    write (*, '(a,i0,a,11i8)') 'rank ', rank, ' reduce_in_place ', b
  else
    call MPI_Reduce(b, b, 11, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  end if
  b = a
  call MPI_Bcast(b, 11, MPI_INTEGER, nproc - 1, MPI_COMM_WORLD, ierr)
  write (*, '(a,i0,a,11i8)') 'rank ', rank, ' bcast ', b
  g = -1
  g(rank * 2 + 1) = rank
  g(rank * 2 + 2) = rank * 7
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_INTEGER, g, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  write (*, '(a,i0,a,16i6)') 'rank ', rank, ' allgather_in_place ', g(1:min(16, 2 * nproc))
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  right = mod(rank + 1, nproc)
  left = mod(rank + nproc - 1, nproc)
  b = 0
  call MPI_Irecv(b, 11, MPI_INTEGER, left, 4, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(a, 11, MPI_INTEGER, right, 4, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, st, ierr)
#if defined(BIND_F08)
  write (*, '(a,i0,a,i0,a,i0)') 'rank ', rank, ' irecv source ', st(1)%MPI_SOURCE, ' tag ', st(1)%MPI_TAG
#else
  write (*, '(a,i0,a,i0,a,i0)') 'rank ', rank, ' irecv source ', st(MPI_SOURCE, 1), ' tag ', st(MPI_TAG, 1)
#endif
  write (*, '(a,i0,a,11i8)') 'rank ', rank, ' irecv ', b
  call MPI_Sendrecv(a, 3, MPI_INTEGER, right, 5, b, 3, MPI_INTEGER, left, 5, MPI_COMM_WORLD, st1, ierr)
  call MPI_Get_count(st1, MPI_INTEGER, cnt, ierr)
  write (*, '(a,i0,a,3i8,a,i0)') 'rank ', rank, ' sendrecv ', b(1:3), ' count ', cnt

  call MPI_Type_vector(3, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  b = 0
  call MPI_Sendrecv(a, 1, vec, right, 6, b, 1, vec, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  write (*, '(a,i0,a,11i8)') 'rank ', rank, ' vector ', b
  call MPI_Type_free(vec, ierr)

  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Allreduce(a, b, 11, MPI_INTEGER, MPI_MIN, dup, ierr)
  write (*, '(a,i0,a,11i8)') 'rank ', rank, ' allreduce_dup ', b
  call MPI_Comm_free(dup, ierr)
  call MPI_Finalize(ierr)
end program f_calls
