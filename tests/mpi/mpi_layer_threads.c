// MPI_THREAD_MULTIPLE through the layer: several threads per rank, each driving its own
// communicator at the same time as the others, with the tables the layer shares across
// communicators in use at once: datatypes and user ops created, used and freed by every thread,
// sub-communicators split and freed (teams made, kept and taken from the pool while other threads
// do the same over the same ranks). Every result is checked against a reference computed from
// the inputs; one digest line per rank lets run_mpi_layer_test.sh compare runs with and without
// the layer.
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kThreads = 3, kRounds = 24, kMaxCount = 20000 };

struct Worker {
  int index;
  MPI_Comm comm;
  uint64_t digest;
  int failures;
};

#define CHECK(worker, cond, ...)                                                       \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      ++(worker)->failures;                                                            \
      fprintf(stderr, "thread %d line %d: check failed: ", (worker)->index, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                                    \
      fprintf(stderr, "\n");                                                           \
    }                                                                                  \
  } while (0)

static void absorb(struct Worker* worker, const void* data, size_t bytes) {
  const unsigned char* p = data;
  for (size_t i = 0; i < bytes; ++i) worker->digest = (worker->digest ^ p[i]) * 1099511628211ull;
}

static int64_t value(int thread, int round, int rank, int i) {
  return (int64_t)(((thread + 1) * 7 + round * 131 + (rank + 1) * 1000003 + i * 7919) % 1000) - 300;
}

// Keeps the larger absolute value: commutative, but only a user op (so the layer calls it back).
static void larger_magnitude(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int64_t* a = in;
  int64_t* b = inout;
  for (int i = 0; i < *len; ++i) {
    if (llabs(a[i]) > llabs(b[i]) || (llabs(a[i]) == llabs(b[i]) && a[i] > b[i])) b[i] = a[i];
  }
}

static void check_round(struct Worker* w, MPI_Comm comm, int round, int64_t* send, int64_t* recv,
                        int64_t* expect) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int count = 1 + (round * 997 + w->index * 4099) % kMaxCount;

  // Allreduce with a predefined op.
  for (int i = 0; i < count; ++i) send[i] = value(w->index, round, rank, i);
  MPI_Allreduce(send, recv, count, MPI_INT64_T, MPI_SUM, comm);
  for (int i = 0; i < count; ++i) {
    expect[i] = 0;
    for (int r = 0; r < size; ++r) expect[i] += value(w->index, round, r, i);
  }
  CHECK(w, memcmp(recv, expect, count * sizeof(int64_t)) == 0, "allreduce round %d", round);
  absorb(w, recv, count * sizeof(int64_t));

  // Reduce with a user op this thread creates and frees (the layer's op table changes meanwhile
  // in the other threads).
  MPI_Op op;
  MPI_Op_create(larger_magnitude, 1, &op);
  const int root = round % size;
  MPI_Reduce(send, recv, count, MPI_INT64_T, op, root, comm);
  if (rank == root) {
    for (int i = 0; i < count; ++i) {
      expect[i] = value(w->index, round, 0, i);
      for (int r = 1; r < size; ++r) {
        int64_t candidate = value(w->index, round, r, i);
        int one = 1;
        larger_magnitude(&candidate, &expect[i], &one, NULL);
      }
    }
    CHECK(w, memcmp(recv, expect, count * sizeof(int64_t)) == 0, "reduce user op round %d", round);
    absorb(w, recv, count * sizeof(int64_t));
  }
  MPI_Op_free(&op);

  // Bcast of a derived type this thread creates and frees: every third int64 of 3 * blocks.
  const int blocks = count / 3;
  MPI_Datatype strided;
  MPI_Type_vector(blocks, 1, 3, MPI_INT64_T, &strided);
  MPI_Type_commit(&strided);
  for (int i = 0; i < 3 * blocks; ++i)
    recv[i] = rank == root ? value(w->index, round, root, i) : -1;
  MPI_Bcast(recv, 1, strided, root, comm);
  for (int i = 0; i < 3 * blocks; ++i) {
    const int64_t wanted = (i % 3 == 0 || rank == root) ? value(w->index, round, root, i) : -1;
    if (recv[i] != wanted) {
      CHECK(w, 0, "bcast strided round %d element %d", round, i);
      break;
    }
  }
  absorb(w, recv, 3 * blocks * sizeof(int64_t));
  MPI_Type_free(&strided);

  // Alltoallv: rank r sends (r + peer + round) % 5 + 1 elements to each peer.
  int sendcounts[64], sdispls[64], recvcounts[64], rdispls[64];
  int sent = 0, received = 0;
  for (int peer = 0; peer < size; ++peer) {
    sendcounts[peer] = (rank + peer + round) % 5 + 1;
    recvcounts[peer] = (peer + rank + round) % 5 + 1;
    sdispls[peer] = sent, rdispls[peer] = received;
    for (int i = 0; i < sendcounts[peer]; ++i) send[sent + i] = rank * 1000 + peer * 10 + i;
    sent += sendcounts[peer], received += recvcounts[peer];
  }
  MPI_Alltoallv(send, sendcounts, sdispls, MPI_INT64_T, recv, recvcounts, rdispls, MPI_INT64_T,
                comm);
  for (int peer = 0; peer < size; ++peer) {
    for (int i = 0; i < recvcounts[peer]; ++i) {
      CHECK(w, recv[rdispls[peer] + i] == peer * 1000 + rank * 10 + i, "alltoallv round %d", round);
    }
  }
  absorb(w, recv, received * sizeof(int64_t));

  // Scan in place with MPI_MAX on doubles.
  double prefix[4];
  for (int i = 0; i < 4; ++i) prefix[i] = (double)value(w->index, round, rank, i);
  MPI_Scan(MPI_IN_PLACE, prefix, 4, MPI_DOUBLE, MPI_MAX, comm);
  for (int i = 0; i < 4; ++i) {
    double wanted = (double)value(w->index, round, 0, i);
    for (int r = 1; r <= rank; ++r) {
      const double v = (double)value(w->index, round, r, i);
      if (v > wanted) wanted = v;
    }
    CHECK(w, prefix[i] == wanted, "scan round %d", round);
  }
  absorb(w, prefix, sizeof prefix);
}

static void* drive(void* argument) {
  struct Worker* w = argument;
  int64_t* send = malloc(3 * kMaxCount * sizeof(int64_t));
  int64_t* recv = malloc(3 * kMaxCount * sizeof(int64_t));
  int64_t* expect = malloc(3 * kMaxCount * sizeof(int64_t));
  int rank = 0;
  MPI_Comm_rank(w->comm, &rank);
  for (int round = 0; round < kRounds; ++round) {
    check_round(w, w->comm, round, send, recv, expect);
    if (round % 8 == 7) {
      // A sub-communicator over the same ranks as the other threads' (the pool's teams are
      // made, kept and taken by every thread at once), then one of a reversed rank order.
      for (int key_sign = 1; key_sign >= -1; key_sign -= 2) {
        MPI_Comm sub;
        MPI_Comm_split(w->comm, 0, key_sign * rank, &sub);
        check_round(w, sub, round, send, recv, expect);
        check_round(w, sub, round + 1, send, recv, expect);
        MPI_Comm_free(&sub);
      }
    }
  }
  free(send);
  free(recv);
  free(expect);
  return NULL;
}

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided != MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "the MPI provides thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  struct Worker workers[kThreads];
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {  // dups are collective on MPI_COMM_WORLD: made in order
    workers[t] = (struct Worker){t, MPI_COMM_NULL, 1469598103934665603ull, 0};
    MPI_Comm_dup(MPI_COMM_WORLD, &workers[t].comm);
  }
  for (int t = 0; t < kThreads; ++t) pthread_create(&threads[t], NULL, drive, &workers[t]);
  int failures = 0;
  uint64_t digest = 0;
  for (int t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    failures += workers[t].failures;
    digest = digest * 31 + workers[t].digest;
    MPI_Comm_free(&workers[t].comm);
  }
  int one = 1, total = 0;  // the main thread's own call after the others
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d digest %016llx failures %d\n", rank, (unsigned long long)digest, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
