// Nonblocking and persistent collectives through the layer: every nonblocking collective against
// a reference computed from the inputs; several outstanding at once, mixed with a blocking call
// and with point-to-point requests, completed by each completion call (wait, test, waitall,
// testall, waitany, testany, waitsome, testsome, request_get_status); a nonblocking barrier that
// must progress while its rank blocks in a receive its peer satisfies only after its own wait; a
// bad count refused at issue; persistent collectives (MPI 4) started many times; calls that
// outlive their communicator (freed while a call is pending, or before a persistent start). Each
// rank prints a digest of its results, for the comparison with the run without the layer.
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

enum { kCount = 1000 };
static int rank, size;

static int value(int r, int i, int round) {
  return (r * 7919 + i * 31 + round * 17) % 1013 - 500;
}

// Every nonblocking collective once, completed one by one in issue order.
static void each_collective(int round) {
  int* mine = malloc(sizeof(int) * kCount * size);
  int* out = malloc(sizeof(int) * kCount * size);
  int* counts = malloc(sizeof(int) * size);
  int* displs = malloc(sizeof(int) * size);
  const int root = round % size;
  MPI_Request request;
  for (int i = 0; i < kCount * size; ++i) mine[i] = value(rank, i, round);

  MPI_Iallreduce(mine, out, kCount, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  int good = 1;
  for (int i = 0; i < kCount; ++i) {
    int sum = 0;
    for (int r = 0; r < size; ++r) sum += value(r, i, round);
    good &= out[i] == sum;
  }
  CHECK(good, "iallreduce");
  absorb(out, sizeof(int) * kCount);

  memset(out, 0, sizeof(int) * kCount);
  MPI_Ireduce(mine, out, kCount, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  if (rank == root) {
    good = 1;
    for (int i = 0; i < kCount; ++i) {
      int best = value(0, i, round);
      for (int r = 1; r < size; ++r) best = value(r, i, round) > best ? value(r, i, round) : best;
      good &= out[i] == best;
    }
    CHECK(good, "ireduce");
    absorb(out, sizeof(int) * kCount);
  }

  for (int i = 0; i < kCount; ++i) out[i] = rank == root ? value(root, i, round) : 0;
  MPI_Ibcast(out, kCount, MPI_INT, root, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  good = 1;
  for (int i = 0; i < kCount; ++i) good &= out[i] == value(root, i, round);
  CHECK(good, "ibcast");

  MPI_Iscan(mine, out, kCount, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  good = 1;
  for (int i = 0; i < kCount; ++i) {
    int sum = 0;
    for (int r = 0; r <= rank; ++r) sum += value(r, i, round);
    good &= out[i] == sum;
  }
  CHECK(good, "iscan");
  absorb(out, sizeof(int) * kCount);

  MPI_Ialltoall(mine, kCount, MPI_INT, out, kCount, MPI_INT, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  good = 1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < kCount; ++i)
      good &= out[r * kCount + i] == value(r, rank * kCount + i, round);
  }
  CHECK(good, "ialltoall");

  // Allgatherv with counts that differ by rank, from arrays the program changes right after the
  // issue (the layer keeps its own copy).
  for (int r = 0; r < size; ++r) counts[r] = 1 + (r + round) % 5, displs[r] = r * 8;
  MPI_Iallgatherv(mine, counts[rank], MPI_INT, out, counts, displs, MPI_INT, MPI_COMM_WORLD,
                  &request);
  for (int r = 0; r < size; ++r) counts[r] = -1, displs[r] = -1;
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  good = 1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < 1 + (r + round) % 5; ++i) good &= out[r * 8 + i] == value(r, i, round);
  }
  CHECK(good, "iallgatherv");

  MPI_Igather(mine, 3, MPI_INT, out, 3, MPI_INT, root, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  if (rank == root) {
    good = 1;
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < 3; ++i) good &= out[r * 3 + i] == value(r, i, round);
    }
    CHECK(good, "igather");
  }

  MPI_Iscatter(mine, 2, MPI_INT, out, 2, MPI_INT, root, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  CHECK(out[0] == value(root, 2 * rank, round) && out[1] == value(root, 2 * rank + 1, round),
        "iscatter");

  MPI_Ireduce_scatter_block(mine, out, kCount / size, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  good = 1;
  for (int i = 0; i < kCount / size; ++i) {
    int sum = 0;
    for (int r = 0; r < size; ++r) sum += value(r, rank * (kCount / size) + i, round);
    good &= out[i] == sum;
  }
  CHECK(good, "ireduce_scatter_block");
  absorb(out, sizeof(int) * (kCount / size));

  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  CHECK(request == MPI_REQUEST_NULL, "a completed request is MPI_REQUEST_NULL");
  free(mine), free(out), free(counts), free(displs);
}

// Four calls outstanding with a blocking one between them and a point-to-point exchange, then
// completed by `how` (0 waitall, 1 testall, 2 waitany, 3 testany, 4 waitsome, 5 testsome,
// 6 test and request_get_status).
static void outstanding(int round, int how) {
  double a[64], b[64], c = rank + round, c_sum = 0, ring = -1;
  int block[8], gathered[64];
  for (int i = 0; i < 64; ++i) a[i] = rank * 64 + i + round;
  for (int i = 0; i < 8; ++i) block[i] = rank == 0 ? round * 8 + i : -1;
  MPI_Request requests[6];
  MPI_Iallreduce(a, b, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &requests[0]);
  MPI_Ibcast(block, 8, MPI_INT, 0, MPI_COMM_WORLD, &requests[1]);
  MPI_Allreduce(&c, &c_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Iallgather(&rank, 1, MPI_INT, gathered, 1, MPI_INT, MPI_COMM_WORLD, &requests[2]);
  MPI_Ibarrier(MPI_COMM_WORLD, &requests[3]);
  const double sent = rank * 10 + round;
  MPI_Irecv(&ring, 1, MPI_DOUBLE, (rank + size - 1) % size, round, MPI_COMM_WORLD, &requests[4]);
  MPI_Isend(&sent, 1, MPI_DOUBLE, (rank + 1) % size, round, MPI_COMM_WORLD, &requests[5]);
  int done = 0, flag = 0, index = 0, outcount = 0, indices[6];
  MPI_Status statuses[6];
  switch (how) {
    case 0:
      MPI_Waitall(6, requests, statuses);
      break;
    case 1:
      while (!flag) MPI_Testall(6, requests, &flag, statuses);
      break;
    case 2:
      for (; done < 6; ++done) MPI_Waitany(6, requests, &index, MPI_STATUS_IGNORE);
      MPI_Waitany(6, requests, &index, MPI_STATUS_IGNORE);
      CHECK(index == MPI_UNDEFINED, "waitany with no active request");
      break;
    case 3:
      while (done < 6) {
        MPI_Testany(6, requests, &index, &flag, MPI_STATUS_IGNORE);
        if (flag && index != MPI_UNDEFINED) ++done;
      }
      break;
    case 4:
      while (done < 6) {
        MPI_Waitsome(6, requests, &outcount, indices, statuses);
        CHECK(outcount > 0, "waitsome returns at least one");
        done += outcount;
      }
      break;
    case 5:
      while (done < 6) {
        MPI_Testsome(6, requests, &outcount, indices, statuses);
        done += outcount;
      }
      break;
    default:
      for (int i = 0; i < 6; ++i) {
        for (flag = 0; !flag;) MPI_Request_get_status(requests[i], &flag, MPI_STATUS_IGNORE);
        MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
        CHECK(flag, "test after request_get_status said complete");
      }
  }
  for (int i = 0; i < 6; ++i) CHECK(requests[i] == MPI_REQUEST_NULL, "every request completed");
  int good = 1;
  for (int i = 0; i < 64; ++i) good &= b[i] == 64.0 * size * (size - 1) / 2 + size * (i + round);
  CHECK(good, "iallreduce among others");
  good = 1;
  for (int i = 0; i < 8; ++i) good &= block[i] == round * 8 + i;
  CHECK(good, "ibcast among others");
  CHECK(c_sum == size * (size - 1) / 2.0 + size * round, "allreduce among nonblocking calls");
  for (int r = 0; r < size; ++r) CHECK(gathered[r] == r, "iallgather among others");
  CHECK(ring == ((rank + size - 1) % size) * 10 + round, "the point-to-point message");
  absorb(b, sizeof b);
}

// Rank 0 blocks in a receive that rank 1 satisfies only after its nonblocking barrier completes:
// rank 0's barrier must progress while rank 0 waits in the receive.
static void barrier_progresses_during_receive(void) {
  MPI_Request request;
  int token = 0;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  if (rank == 0) {
    MPI_Recv(&token, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    CHECK(token == 42, "the token sent after the barrier");
  } else {
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    token = 42;
    if (rank == 1) MPI_Send(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
}

static void bad_count_at_issue(void) {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Request request = MPI_REQUEST_NULL;
  double x = 0, y = 0;
  const int rc = MPI_Iallreduce(&x, &y, -1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
  int error_class = MPI_SUCCESS;
  MPI_Error_class(rc, &error_class);
  // (MPICH alone answers with a class of its own; the standard names MPI_ERR_COUNT.)
  if (shmcoll_mpi_layer_version) {
    CHECK(error_class == MPI_ERR_COUNT, "a negative count refused with MPI_ERR_COUNT");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

#if MPI_VERSION >= 4
// Planned once, started many times, with inputs that change between starts.
static void persistent(void) {
  double in[32] = {0}, out[32] = {0};
  int block[4];
  MPI_Request requests[2];
  MPI_Status statuses[2];
  MPI_Allreduce_init(in, out, 32, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &requests[0]);
  MPI_Bcast_init(block, 4, MPI_INT, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &requests[1]);
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 32; ++i) in[i] = rank + i * round;
    for (int i = 0; i < 4; ++i) block[i] = rank == size - 1 ? round * 4 + i : -1;
    if (round % 2) {
      MPI_Startall(2, requests);
      MPI_Waitall(2, requests, statuses);
    } else {
      MPI_Start(&requests[0]);
      MPI_Wait(&requests[0], MPI_STATUS_IGNORE);
      MPI_Start(&requests[1]);
      int flag = 0;
      while (!flag) MPI_Test(&requests[1], &flag, MPI_STATUS_IGNORE);
    }
    CHECK(requests[0] != MPI_REQUEST_NULL, "a persistent request stays allocated");
    int good = 1;
    for (int i = 0; i < 32; ++i) good &= out[i] == size * (size - 1) / 2.0 + size * i * round;
    CHECK(good, "persistent allreduce");
    good = 1;
    for (int i = 0; i < 4; ++i) good &= block[i] == round * 4 + i;
    CHECK(good, "persistent bcast");
    absorb(out, sizeof out);
  }
  MPI_Request_free(&requests[0]);
  MPI_Request_free(&requests[1]);
}
#endif

// Calls that outlive their communicator: MPI_Comm_free with a nonblocking call pending (legal: the
// call completes as if the communicator were still there), and a persistent request started
// after its communicator was freed.
static void block_from(int* block, int n, int root, int round) {
  for (int i = 0; i < n; ++i) block[i] = rank == root ? round * 1000 + i : -1;
}
static int block_is(const int* block, int n, int round) {
  int good = 1;
  for (int i = 0; i < n; ++i) good &= block[i] == round * 1000 + i;
  return good;
}
static void outlives_its_communicator(void) {
  enum { n = 256 };
  int block[n];
  for (int round = 0; round < 4; ++round) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Barrier(dup);  // its members agree on its team here (or take the last one's)
    block_from(block, n, round % size, round);
    MPI_Request request;
    MPI_Ibcast(block, n, MPI_INT, round % size, dup, &request);
    MPI_Comm_free(&dup);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    CHECK(block_is(block, n, round), "ibcast completed after its communicator was freed");
  }
#if MPI_VERSION >= 4
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Barrier(dup);
  MPI_Request request;
  MPI_Bcast_init(block, n, MPI_INT, size - 1, dup, MPI_INFO_NULL, &request);
  MPI_Comm_free(&dup);
  for (int round = 0; round < 4; ++round) {
    block_from(block, n, size - 1, round);
    MPI_Start(&request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    CHECK(block_is(block, n, round), "persistent bcast started after its communicator was freed");
  }
  MPI_Request_free(&request);
#endif
  absorb(block, sizeof block);
}

int main(int argc, char** argv) {
  // SHMCOLL_TEST_THREAD_MULTIPLE=1: at that level the layer serves nonblocking calls on
  // communicators spanning nodes too (node by node, on the node team's worker).
  const char* multiple = getenv("SHMCOLL_TEST_THREAD_MULTIPLE");
  if (multiple && strcmp(multiple, "1") == 0) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE) {
      fprintf(stderr, "the MPI does not provide MPI_THREAD_MULTIPLE\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // A blocking call first: the members agree on the communicator's team there (a nonblocking
  // call never makes them agree).
  MPI_Barrier(MPI_COMM_WORLD);
  for (int round = 0; round < 6; ++round) each_collective(round);
  for (int round = 0; round < 21; ++round) outstanding(round, round % 7);
  if (size >= 2) barrier_progresses_during_receive();
  bad_count_at_issue();
#if MPI_VERSION >= 4
  persistent();
#endif
  outlives_its_communicator();
  print_digest(rank);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
