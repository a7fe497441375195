"""An unmodified mpi4py program (buffer interface, no numpy needed): each line printed is
compared between the runs with and without libhier."""
import os
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def show(*items):
    # One write per line: the launcher merges the ranks' output streams.
    os.write(1, (" ".join(str(x) for x in ("rank", rank) + items) + "\n").encode())


a = array("i", [rank * 10 + i for i in range(13)])
b = array("i", [0] * 13)
comm.Allreduce(a, b, op=MPI.SUM)
show("allreduce", list(b))
b = array("i", a)
comm.Allreduce(MPI.IN_PLACE, b, op=MPI.MAX)
show("allreduce_in_place", list(b))
d = array("d", [rank + 0.25] * 4)
e = array("d", [0.0] * 4)
comm.Allreduce(d, e, op=MPI.SUM)
show("allreduce_double", list(e))
g = array("i", [0] * (2 * size))
comm.Allgather(a[:2], g)
show("allgather", list(g))
b = array("i", a)
comm.Bcast(b, root=size - 1)
show("bcast", list(b))
show("allreduce_obj", comm.allreduce(rank, op=MPI.SUM))
comm.Barrier()
dup = comm.Dup()
show("dup_size", dup.Get_size())
dup.Free()
