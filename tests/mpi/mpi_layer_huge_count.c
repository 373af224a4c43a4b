// Counts past INT_MAX through MPI-4's large-count forms, where the MPI has them (MPICH 4): an
// MPI_Bcast_c, an in-place MPI_Allreduce_c and an MPI_Iallreduce_c of 2^31 + 13 one-byte
// elements (2 GiB per rank), every element checked against the inputs. Needs about 2.1 GiB per
// rank: run_mpi_layer_test.sh runs it only where MemAvailable allows (else the test is skipped).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

#if MPI_VERSION >= 4

static const MPI_Count kCount = ((MPI_Count)1 << 31) + 13;

// Rank r's element i: small enough that the sum over a few ranks stays within int8, and cheap
// (the checks walk 2 GiB seven times).
static int8_t element(int rank, MPI_Count i) {
  return (int8_t)((i + (i >> 12) + rank * 3) & 15);
}

// The digest takes every 4093rd element: hashing all 2 GiB would take longer than the calls.
static void absorb_sample(const int8_t* data) {
  for (MPI_Count i = 0; i < kCount; i += 4093) absorb(&data[i], 1);
  absorb(&data[kCount - 1], 1);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int8_t* data = malloc((size_t)kCount);
  CHECK(data != NULL, "2 GiB buffer");
  if (!data) MPI_Abort(MPI_COMM_WORLD, 1);

  const int root = size - 1;
  for (MPI_Count i = 0; i < kCount; ++i) data[i] = rank == root ? element(root, i) : -1;
  MPI_Bcast_c(data, kCount, MPI_INT8_T, root, MPI_COMM_WORLD);
  MPI_Count bad = 0;
  for (MPI_Count i = 0; i < kCount; ++i) bad += data[i] != element(root, i);
  CHECK(bad == 0, "MPI_Bcast_c of %lld bytes: %lld wrong", (long long)kCount, (long long)bad);
  absorb_sample(data);

  for (MPI_Count i = 0; i < kCount; ++i) data[i] = element(rank, i);
  MPI_Allreduce_c(MPI_IN_PLACE, data, kCount, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD);
  bad = 0;
  for (MPI_Count i = 0; i < kCount; ++i) {
    int expected = 0;
    for (int r = 0; r < size; ++r) expected += element(r, i);
    bad += data[i] != expected;
  }
  CHECK(bad == 0, "MPI_Allreduce_c of %lld int8: %lld wrong", (long long)kCount, (long long)bad);
  absorb_sample(data);

  for (MPI_Count i = 0; i < kCount; ++i) data[i] = element(rank, i);
  MPI_Request request;
  MPI_Iallreduce_c(MPI_IN_PLACE, data, kCount, MPI_INT8_T, MPI_MAX, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  bad = 0;
  for (MPI_Count i = 0; i < kCount; ++i) {
    int8_t expected = element(0, i);
    for (int r = 1; r < size; ++r) expected = element(r, i) > expected ? element(r, i) : expected;
    bad += data[i] != expected;
  }
  CHECK(bad == 0, "MPI_Iallreduce_c of %lld int8: %lld wrong", (long long)kCount, (long long)bad);
  absorb_sample(data);

  free(data);
  print_digest(rank);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}

#else

#include <stdio.h>

int main(void) {
  printf("MPI %d.%d has no large-count forms\n", MPI_VERSION, MPI_SUBVERSION);
  return 77;
}

#endif
