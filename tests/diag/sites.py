"""Call sites of an mpi4py program (tests/diag/run_sites.py): the hang report and the report's
call_sites must name this file's lines (the SITE markers), not mpi4py's module. Rank 1 sleeps
before the last allreduce until the driver creates the file argv[1] (once the hang report is out)."""
import os
import sys
import time
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
x = array("d", [rank + 1.0])
y = array("d", [0.0])


def step():
    comm.Allreduce(x, y, op=MPI.SUM)  # SITE:loop


for _ in range(3):
    step()
comm.Barrier()  # SITE:barrier
if rank == 1:
    os.write(1, b"FAULT rank 1\n")
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.02)
comm.Allreduce(x, y, op=MPI.SUM)  # SITE:hang
os.write(1, f"DONE rank {rank}\n".encode())
