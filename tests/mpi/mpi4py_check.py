#!/usr/bin/python3
# A Python program as users write them with mpi4py (which initialises MPI at
# MPI_THREAD_MULTIPLE): numpy buffers through the buffer collectives, blocking and nonblocking,
# in place and not, the pickle collectives, MPI.Alloc_mem's memory, and a split communicator. Every result is checked against a reference
# computed from the inputs; one digest line per rank lets run_mpi_layer_test.sh compare runs with
# and without the layer.
import hashlib
import os
import sys

import numpy as np
from mpi4py import MPI

digest = hashlib.sha256()
failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"check failed: {what}", file=sys.stderr)


def absorb(array):
    digest.update(np.ascontiguousarray(array).tobytes())


def values(rank, count, salt=0):
    # Whole numbers, so float sums are exact in any order.
    return ((np.arange(count, dtype=np.int64) * 7919 + (rank + 1) * 1000003 + salt) % 1000
            - 300).astype(np.float64)


def check_all(comm, salt):
    rank, size = comm.Get_rank(), comm.Get_size()
    every = [values(r, 1, salt) for r in range(size)]
    for count in (1, 1000, 131072):
        mine = values(rank, count, salt)
        total = sum(values(r, count, salt) for r in range(size))
        out = np.empty(count)
        comm.Allreduce(mine, out, op=MPI.SUM)
        check(np.array_equal(out, total), f"Allreduce {count}")
        absorb(out)
        inplace = mine.copy()
        comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.MAX)
        check(np.array_equal(inplace, np.max([values(r, count, salt) for r in range(size)], 0)),
              f"Allreduce in place {count}")
        absorb(inplace)
        root = count % size
        reduced = np.empty(count) if rank == root else None
        comm.Reduce(mine, reduced, op=MPI.SUM, root=root)
        if rank == root:
            check(np.array_equal(reduced, total), f"Reduce {count}")
            absorb(reduced)
        block = mine.copy() if rank == root else np.zeros(count)
        comm.Bcast(block, root=root)
        check(np.array_equal(block, values(root, count, salt)), f"Bcast {count}")
        absorb(block)
        # Nonblocking: two outstanding, completed together, then one by Test.
        summed = np.empty(count)
        block = mine.copy() if rank == root else np.zeros(count)
        requests = [comm.Iallreduce(mine, summed, op=MPI.SUM), comm.Ibcast(block, root=root)]
        MPI.Request.Waitall(requests)
        check(np.array_equal(summed, total), f"Iallreduce {count}")
        check(np.array_equal(block, values(root, count, salt)), f"Ibcast {count}")
        request = comm.Iallreduce(MPI.IN_PLACE, summed, op=MPI.MAX)
        while not request.Test():
            pass
        check(np.array_equal(summed, total), f"Iallreduce in place {count}")
        absorb(summed)

    # Prefix reductions on int64.
    mine = values(rank, 5, salt).astype(np.int64)
    prefix = np.empty(5, dtype=np.int64)
    comm.Scan(mine, prefix, op=MPI.SUM)
    check(np.array_equal(prefix, sum(values(r, 5, salt).astype(np.int64)
                                     for r in range(rank + 1))), "Scan")
    absorb(prefix)
    before = np.zeros(5, dtype=np.int64)
    comm.Exscan(mine, before, op=MPI.SUM)
    if rank > 0:
        check(np.array_equal(before, sum(values(r, 5, salt).astype(np.int64)
                                         for r in range(rank))), "Exscan")
        absorb(before)

    # Reduce_scatter_block: 3 elements per rank.
    mine = values(rank, 3 * size, salt)
    part = np.empty(3)
    comm.Reduce_scatter_block(mine, part, op=MPI.SUM)
    check(np.array_equal(part, sum(values(r, 3 * size, salt)
                                   for r in range(size))[3 * rank:3 * rank + 3]),
          "Reduce_scatter_block")
    absorb(part)

    # Data movement: 1000 doubles per rank.
    root = salt % size
    table = np.arange(1000 * size, dtype=np.float64) + salt
    piece = np.empty(1000)
    comm.Scatter(table if rank == root else None, piece, root=root)
    check(np.array_equal(piece, table[1000 * rank:1000 * (rank + 1)]), "Scatter")
    absorb(piece)
    gathered = np.empty(1000 * size) if rank == root else None
    comm.Gather(piece, gathered, root=root)
    if rank == root:
        check(np.array_equal(gathered, table), "Gather")
        absorb(gathered)
    everyone = np.empty(1000 * size)
    comm.Allgather(piece, everyone)
    check(np.array_equal(everyone, table), "Allgather")
    absorb(everyone)
    send = np.array([rank * 100 + peer for peer in range(size) for _ in range(4)],
                    dtype=np.int32)
    received = np.empty(4 * size, dtype=np.int32)
    comm.Alltoall(send, received)
    check(np.array_equal(received, np.repeat(np.arange(size, dtype=np.int32) * 100 + rank, 4)),
          "Alltoall")
    absorb(received)

    # The pickle collectives.
    obj = {"rank": rank, "salt": salt, "text": "x" * (rank + 1)}
    check(comm.bcast(obj if rank == root else None, root=root)["rank"] == root, "bcast")
    got = comm.gather(obj, root=root)
    if rank == root:
        check([o["rank"] for o in got] == list(range(size)), "gather")
    check([o["text"] for o in comm.allgather(obj)] == ["x" * (r + 1) for r in range(size)],
          "allgather")
    check(comm.allreduce(rank + salt, op=MPI.SUM) == size * salt + size * (size - 1) // 2,
          "allreduce")
    check(comm.scatter([r * r for r in range(size)] if rank == root else None, root=root)
          == rank * rank, "scatter")
    check(comm.alltoall([(rank, peer) for peer in range(size)])
          == [(peer, rank) for peer in range(size)], "alltoall")
    check(float(every[rank][0]) == values(rank, 1, salt)[0], "inputs")
    comm.Barrier()


def check_alloc_mem(comm):
    # Memory from MPI.Alloc_mem (the layer's shared pages, with it), in an Alltoall and an
    # Allreduce of 320,000-byte blocks, freed with MPI.Free_mem.
    rank, size = comm.Get_rank(), comm.Get_size()
    count = 80000
    send_memory = MPI.Alloc_mem(4 * count * size)
    recv_memory = MPI.Alloc_mem(4 * count * size)
    send = np.frombuffer(send_memory, dtype=np.int32)
    received = np.frombuffer(recv_memory, dtype=np.int32)
    send[:] = np.repeat(np.arange(size, dtype=np.int32) * 1000 + rank, count)
    comm.Alltoall(send, received)
    check(np.array_equal(received, np.repeat(np.arange(size, dtype=np.int32) + rank * 1000, count)),
          "Alltoall of Alloc_mem memory")
    absorb(received)
    send[:] = np.arange(count * size, dtype=np.int32) % 1000 + rank
    comm.Allreduce(send, received)
    check(np.array_equal(received, (np.arange(count * size, dtype=np.int32) % 1000) * size
                         + size * (size - 1) // 2), "Allreduce of Alloc_mem memory")
    absorb(received)
    del send, received
    MPI.Free_mem(send_memory)
    MPI.Free_mem(recv_memory)


world = MPI.COMM_WORLD
check_all(world, 0)
check_alloc_mem(world)
halves = world.Split(world.Get_rank() % 2, world.Get_rank())
check_all(halves, 1)
halves.Free()
reversed_order = world.Split(0, world.Get_size() - world.Get_rank())
for salt in range(2, 5):
    check_all(reversed_order, salt)
reversed_order.Free()
# One write, so the launcher does not interleave the ranks' lines.
os.write(1, f"rank {world.Get_rank()} digest {digest.hexdigest()[:16]} failures {failures}\n"
         .encode())
sys.exit(1 if failures else 0)
