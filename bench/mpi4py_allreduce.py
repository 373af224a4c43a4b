#!/usr/bin/python3
# Allreduce of numpy float64 from Python, timed as users time it: a barrier, one call, the slowest
# rank's time; the median over the iterations, per size. Run it under mpirun with and without the
# MPI layer preloaded and compare (tools/mpi4py-vs runs both, interleaved).
#   mpirun -np 2 bench/mpi4py_allreduce.py [ITERATIONS]
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 400
for size in (8, 8 << 10, 1 << 20):
    send = np.ones(size // 8)
    recv = np.empty_like(send)
    slowest = np.empty(1)
    times = []
    for i in range(iterations + 10):
        comm.Barrier()
        start = MPI.Wtime()
        comm.Allreduce(send, recv, op=MPI.SUM)
        took = np.array([MPI.Wtime() - start])
        comm.Reduce(took, slowest, op=MPI.MAX, root=0)
        if i >= 10:  # the first calls warm up (a communicator's team is made on first use)
            times.append(slowest[0])
    assert recv[0] == comm.Get_size()
    if comm.Get_rank() == 0:
        print(f"allreduce {size} B median {np.median(times) * 1e6:.2f} us", flush=True)
