"""An unmodified mpi4py program (buffer interface, no numpy needed): each line printed is
compared between the runs with and without libhier."""
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
a = array("i", [rank * 10 + i for i in range(13)])
b = array("i", [0] * 13)
comm.Allreduce(a, b, op=MPI.SUM)
print("rank", rank, "allreduce", list(b))
b = array("i", a)
comm.Allreduce(MPI.IN_PLACE, b, op=MPI.MAX)
print("rank", rank, "allreduce_in_place", list(b))
d = array("d", [rank + 0.25] * 4)
e = array("d", [0.0] * 4)
comm.Allreduce(d, e, op=MPI.SUM)
print("rank", rank, "allreduce_double", list(e))
g = array("i", [0] * (2 * size))
comm.Allgather(a[:2], g)
print("rank", rank, "allgather", list(g))
b = array("i", a)
comm.Bcast(b, root=size - 1)
print("rank", rank, "bcast", list(b))
print("rank", rank, "allreduce_obj", comm.allreduce(rank, op=MPI.SUM))
comm.Barrier()
dup = comm.Dup()
print("rank", rank, "dup_size", dup.Get_size())
dup.Free()
