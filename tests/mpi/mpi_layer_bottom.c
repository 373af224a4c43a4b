// MPI_BOTTOM as the buffer, with struct types of absolute addresses: the standard's way to send
// scattered variables, and what mpi4py's testAlltoallwBottom does. Bcast, gather, allgather and
// alltoallw, blocking and nonblocking, with one-block types (which the layer sees as
// contiguous) and two-block ones, small and large; every result checked against the inputs.
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

static int value(int rank, int part, int i) {
  return rank * 1000003 + part * 7919 + i;
}

// `n` ints at `a` (and `n` more at `b`, where b is not null), named by absolute address.
static MPI_Datatype absolute(int* a, int* b, int n) {
  MPI_Aint addresses[2];
  MPI_Get_address(a, &addresses[0]);
  if (b) MPI_Get_address(b, &addresses[1]);
  int lengths[2] = {n, n};
  MPI_Datatype types[2] = {MPI_INT, MPI_INT}, made;
  MPI_Type_create_struct(b ? 2 : 1, lengths, addresses, types, &made);
  MPI_Type_commit(&made);
  return made;
}

static void fill(int* data, int n, int rank, int part) {
  for (int i = 0; i < n; ++i) data[i] = value(rank, part, i);
}

static int holds(const int* data, int n, int rank, int part) {
  for (int i = 0; i < n; ++i) {
    if (data[i] != value(rank, part, i)) return 0;
  }
  return 1;
}

static void wait_if(int nonblocking, MPI_Request* request) {
  if (nonblocking) MPI_Wait(request, MPI_STATUS_IGNORE);
}

static void check_bottom_calls(MPI_Comm comm, int n, int nonblocking) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const char* how = nonblocking ? "nonblocking" : "blocking";
  MPI_Request request = MPI_REQUEST_NULL;
  int* x = calloc((size_t)n, sizeof(int));
  int* y = calloc((size_t)n, sizeof(int));
  int* all = calloc((size_t)n * (size_t)size, sizeof(int));
  int** sends = calloc((size_t)size, sizeof(int*));
  int** recvs = calloc((size_t)size, sizeof(int*));
  MPI_Datatype* send_types = calloc((size_t)size, sizeof(MPI_Datatype));
  MPI_Datatype* recv_types = calloc((size_t)size, sizeof(MPI_Datatype));
  int* ones = calloc((size_t)size, sizeof(int));
  int* zeros = calloc((size_t)size, sizeof(int));

  // Bcast: the root's two variables, as one two-block type; then one of them alone.
  const int root = size - 1;
  if (rank == root) fill(x, n, root, 1), fill(y, n, root, 2);
  MPI_Datatype pair = absolute(x, y, n), single = absolute(x, NULL, n);
  if (nonblocking) {
    MPI_Ibcast(MPI_BOTTOM, 1, pair, root, comm, &request);
  } else {
    MPI_Bcast(MPI_BOTTOM, 1, pair, root, comm);
  }
  wait_if(nonblocking, &request);
  CHECK(holds(x, n, root, 1) && holds(y, n, root, 2),
        "%s bcast of two blocks from MPI_BOTTOM, %d ints", how, n);
  if (rank == root) fill(x, n, root, 3);
  if (nonblocking) {
    MPI_Ibcast(MPI_BOTTOM, 1, single, root, comm, &request);
  } else {
    MPI_Bcast(MPI_BOTTOM, 1, single, root, comm);
  }
  wait_if(nonblocking, &request);
  CHECK(holds(x, n, root, 3), "%s bcast of one block from MPI_BOTTOM, %d ints", how, n);

  // Gather and allgather: each rank's variable x, sent from MPI_BOTTOM.
  fill(x, n, rank, 4);
  memset(all, 0, sizeof(int) * (size_t)n * (size_t)size);
  if (nonblocking) {
    MPI_Igather(MPI_BOTTOM, 1, single, all, n, MPI_INT, 0, comm, &request);
  } else {
    MPI_Gather(MPI_BOTTOM, 1, single, all, n, MPI_INT, 0, comm);
  }
  wait_if(nonblocking, &request);
  if (rank == 0) {
    int good = 1;
    for (int r = 0; r < size; ++r) good &= holds(all + (size_t)r * n, n, r, 4);
    CHECK(good, "%s gather from MPI_BOTTOM, %d ints", how, n);
  }
  memset(all, 0, sizeof(int) * (size_t)n * (size_t)size);
  if (nonblocking) {
    MPI_Iallgather(MPI_BOTTOM, 1, single, all, n, MPI_INT, comm, &request);
  } else {
    MPI_Allgather(MPI_BOTTOM, 1, single, all, n, MPI_INT, comm);
  }
  wait_if(nonblocking, &request);
  int good = 1;
  for (int r = 0; r < size; ++r) good &= holds(all + (size_t)r * n, n, r, 4);
  CHECK(good, "%s allgather from MPI_BOTTOM, %d ints", how, n);

  // Alltoallw with both buffers MPI_BOTTOM: a variable of its own for every peer, each way.
  for (int peer = 0; peer < size; ++peer) {
    sends[peer] = calloc((size_t)n, sizeof(int));
    recvs[peer] = calloc((size_t)n, sizeof(int));
    fill(sends[peer], n, rank, 10 + peer);
    send_types[peer] = absolute(sends[peer], NULL, n);
    recv_types[peer] = absolute(recvs[peer], NULL, n);
    ones[peer] = 1;
  }
  if (nonblocking) {
    MPI_Ialltoallw(MPI_BOTTOM, ones, zeros, send_types, MPI_BOTTOM, ones, zeros, recv_types, comm,
                   &request);
  } else {
    MPI_Alltoallw(MPI_BOTTOM, ones, zeros, send_types, MPI_BOTTOM, ones, zeros, recv_types, comm);
  }
  wait_if(nonblocking, &request);
  good = 1;
  for (int peer = 0; peer < size; ++peer) good &= holds(recvs[peer], n, peer, 10 + rank);
  CHECK(good, "%s alltoallw from and to MPI_BOTTOM, %d ints", how, n);

  for (int peer = 0; peer < size; ++peer) {
    MPI_Type_free(&send_types[peer]);
    MPI_Type_free(&recv_types[peer]);
    free(sends[peer]);
    free(recvs[peer]);
  }
  MPI_Type_free(&pair);
  MPI_Type_free(&single);
  free(x), free(y), free(all), free(sends), free(recvs), free(send_types), free(recv_types);
  free(ones), free(zeros);
}

void check_bottom(MPI_Comm comm) {
  for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
    check_bottom_calls(comm, 5, nonblocking);
    check_bottom_calls(comm, 100000, nonblocking);  // 400 KB: the large paths
  }
}
