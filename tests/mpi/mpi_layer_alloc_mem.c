// MPI_Alloc_mem buffers in the collectives, used fresh, then freed and allocated again as
// programs do between phases: the results are the inputs' with and without the layer, and
// (SHMCOLL_TEST_ALLOC_MEM_SHARED=1, with the layer) the memory is the layer's shared pages,
// which the collectives read from their first call. A small allocation stays the MPI's, and is
// freed through the layer.
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layer_check.h"

// Whether `data` lies in memory the layer made shared pages.
static int in_shared_pages(const void* data) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return 0;
  char line[512];
  int found = 0;
  while (fgets(line, sizeof line, maps)) {
    unsigned long begin = 0, end = 0;
    if (sscanf(line, "%lx-%lx", &begin, &end) == 2 && begin <= (unsigned long)data &&
        (unsigned long)data < end) {
      found = strstr(line, "shmcoll-pages") != NULL;
      break;
    }
  }
  fclose(maps);
  return found;
}

// A forked child's writes into MPI_Alloc_mem memory never reach the parent, and the child sees
// what the memory held at the fork (issue 57, row 3). The child calls no MPI.
static void check_fork_keeps_memory_apart(int* data, size_t bytes) {
  int* before = malloc(bytes);
  CHECK(before != NULL, "malloc");
  memcpy(before, data, bytes);
  const pid_t child = fork();
  if (child == 0) {
    const int saw = memcmp(before, data, bytes) == 0;
    memset(data, 0x5a, bytes);
    _exit(saw ? 0 : 1);
  }
  int status = -1;
  CHECK(child > 0 && waitpid(child, &status, 0) == child, "fork and wait");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "a forked child did not see the MPI_Alloc_mem memory as at the fork (status %d)", status);
  CHECK(memcmp(before, data, bytes) == 0,
        "a forked child's writes reached the parent's MPI_Alloc_mem memory");
  free(before);
}

static int value(int from, int to, int i) {
  return from * 10000000 + to * 100000 + i % 100000;
}

static void check_blocks(const int* data, int count, int size, int to_or_minus_one, int rank,
                         const char* what) {
  int good = 1;
  for (int s = 0; s < size; ++s) {
    for (int i = 0; i < count; ++i) {
      good &= data[s * count + i] == value(s, to_or_minus_one < 0 ? rank : to_or_minus_one, i);
    }
  }
  CHECK(good, "%s of MPI_Alloc_mem buffers", what);
  absorb(data, sizeof(int) * (size_t)count * (size_t)size);
}

void check_alloc_mem(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const char* expect = getenv("SHMCOLL_TEST_ALLOC_MEM_SHARED");
  const int expect_shared = shmcoll_mpi_layer_version && expect && atoi(expect) == 1;
  const int count = 80000;  // 312.5 KiB blocks: above SHMCOLL_SHARE_PAGES_MIN's default
  const MPI_Aint bytes = (MPI_Aint)sizeof(int) * count * size;
  for (int round = 0; round < 2; ++round) {
    int *send = NULL, *recv = NULL;
    CHECK(MPI_Alloc_mem(bytes, MPI_INFO_NULL, &send) == MPI_SUCCESS, "MPI_Alloc_mem");
    CHECK(MPI_Alloc_mem(bytes, MPI_INFO_NULL, &recv) == MPI_SUCCESS, "MPI_Alloc_mem");
    if (expect_shared) {
      CHECK(in_shared_pages(send) && in_shared_pages(recv), "MPI_Alloc_mem memory is not shared");
    } else if (!shmcoll_mpi_layer_version) {
      CHECK(!in_shared_pages(send) && !in_shared_pages(recv), "shared pages without the layer");
    }

    for (int d = 0; d < size; ++d) {
      for (int i = 0; i < count; ++i) send[d * count + i] = value(rank, d, i + round);
    }
    if (round == 0) check_fork_keeps_memory_apart(send, (size_t)bytes);
    MPI_Alltoall(send, count, MPI_INT, recv, count, MPI_INT, comm);
    int good = 1;
    for (int s = 0; s < size; ++s) {
      for (int i = 0; i < count; ++i) good &= recv[s * count + i] == value(s, rank, i + round);
    }
    CHECK(good, "alltoall of MPI_Alloc_mem buffers, round %d", round);
    absorb(recv, (size_t)bytes);

    MPI_Allgather(send, count, MPI_INT, recv, count, MPI_INT, comm);  // each rank's block 0
    good = 1;
    for (int s = 0; s < size; ++s) {
      for (int i = 0; i < count; ++i) good &= recv[s * count + i] == value(s, 0, i + round);
    }
    CHECK(good, "allgather of MPI_Alloc_mem buffers, round %d", round);
    absorb(recv, (size_t)bytes);

    const int root = size - 1;
    MPI_Scatter(send, count, MPI_INT, recv, count, MPI_INT, root, comm);
    good = 1;
    for (int i = 0; i < count; ++i) good &= recv[i] == value(root, rank, i + round);
    CHECK(good, "scatter of MPI_Alloc_mem buffers, round %d", round);
    absorb(recv, sizeof(int) * count);

    MPI_Bcast(send, count * size, MPI_INT, 0, comm);
    good = 1;
    for (int d = 0; d < size; ++d) {
      for (int i = 0; i < count; ++i) good &= send[d * count + i] == value(0, d, i + round);
    }
    CHECK(good, "bcast of MPI_Alloc_mem buffers, round %d", round);
    absorb(send, (size_t)bytes);

    for (int i = 0; i < count * size; ++i) send[i] = rank * 3 + i % 1000 + round;
    MPI_Allreduce(send, recv, count * size, MPI_INT, MPI_SUM, comm);
    good = 1;
    for (int i = 0; i < count * size; ++i) {
      good &= recv[i] == 3 * size * (size - 1) / 2 + size * (i % 1000 + round);
    }
    CHECK(good, "allreduce of MPI_Alloc_mem buffers, round %d", round);
    absorb(recv, (size_t)bytes);

    CHECK(MPI_Free_mem(send) == MPI_SUCCESS && MPI_Free_mem(recv) == MPI_SUCCESS, "MPI_Free_mem");
  }
  char* small = NULL;
  CHECK(MPI_Alloc_mem(64, MPI_INFO_NULL, &small) == MPI_SUCCESS, "a small MPI_Alloc_mem");
  memset(small, 1, 64);
  CHECK(MPI_Free_mem(small) == MPI_SUCCESS, "MPI_Free_mem of a small allocation");
}
