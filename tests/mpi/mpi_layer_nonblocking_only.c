// A program whose collectives are all nonblocking, as MPICH's own Fortran tests are: a loop of
// 1,000 rounds of MPI_Ibarrier, MPI_Ibcast and MPI_Iallreduce on MPI_COMM_WORLD, each checked
// against a reference computed from the inputs. A nonblocking call never makes the members
// agree on a team (a blocking agreement there could deadlock a correct program), so the world's
// members agree in MPI_Init: run by run_mpi_layer_test.sh with the layer's defaults and
// SHMCOLL_TEST_NO_PMPI=1, every call must go through shmcoll.
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "layer_check.h"

enum { kRounds = 1000, kCount = 16 };

static int64_t value(int rank, int i, int round) {
  return (int64_t)rank * 1000003 + i * 31 + round;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int64_t mine[kCount], sum[kCount], data[kCount];
  for (int round = 0; round < kRounds; ++round) {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);

    const int root = round % size;
    for (int i = 0; i < kCount; ++i) data[i] = rank == root ? value(root, i, round) : -1;
    MPI_Ibcast(data, kCount, MPI_INT64_T, root, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    int good = 1;
    for (int i = 0; i < kCount; ++i) good &= data[i] == value(root, i, round);
    CHECK(good, "ibcast, round %d", round);
    absorb(data, sizeof data);

    for (int i = 0; i < kCount; ++i) mine[i] = value(rank, i, round);
    MPI_Iallreduce(mine, sum, kCount, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    good = 1;
    for (int i = 0; i < kCount; ++i) {
      int64_t expected = 0;
      for (int r = 0; r < size; ++r) expected += value(r, i, round);
      good &= sum[i] == expected;
    }
    CHECK(good, "iallreduce, round %d", round);
    absorb(sum, sizeof sum);
  }
  print_digest(rank);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
