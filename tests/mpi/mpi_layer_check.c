// Exercises every call the MPI layer intercepts, on MPI_COMM_WORLD and on sub-communicators, and
// checks each result against a reference computed from the inputs (never against an MPI's own
// output). Prints one digest line per rank over every result, so a run with the layer
// (LD_PRELOAD) and one without can be compared bitwise (run_mpi_layer_test.sh).
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layer_check.h"

static int set_to_zero(const char* name) {
  const char* value = getenv(name);
  return value && strcmp(value, "0") == 0;
}

int layer_serves_every_call(MPI_Comm comm) {
  const char* fake_nodes = getenv("SHMCOLL_MPI_FAKE_NODES");
  int size = 0;
  MPI_Comm_size(comm, &size);
  // By default a communicator's first calls go to PMPI (SHMCOLL_MPI_TEAM_AFTER_CALLS and
  // SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS at 0: a team from its first call).
  // A communicator spanning nodes, real or pretend, reduces between nodes through the MPI.
  MPI_Comm node = MPI_COMM_NULL;
  int node_size = 0;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  return shmcoll_mpi_layer_version && !(fake_nodes && atoi(fake_nodes) > 1) && size > 1 &&
         node_size == size && set_to_zero("SHMCOLL_MPI_TEAM_AFTER_CALLS") &&
         set_to_zero("SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS");
}
static int64_t value(int rank, int i) {
  return (int64_t)((rank + 1) * 1000003 + i * 7919) % 1000 - 300;
}

// 2x2 matrices of uint64 (4 elements each), multiplied modulo 2^64: not commutative.
void matrix_product(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const uint64_t* a = in;
  uint64_t* b = inout;
  for (int m = 0; m + 3 < *len; m += 4) {
    const uint64_t r0 = a[m] * b[m] + a[m + 1] * b[m + 2];
    const uint64_t r1 = a[m] * b[m + 1] + a[m + 1] * b[m + 3];
    const uint64_t r2 = a[m + 2] * b[m] + a[m + 3] * b[m + 2];
    const uint64_t r3 = a[m + 2] * b[m + 1] + a[m + 3] * b[m + 3];
    b[m] = r0, b[m + 1] = r1, b[m + 2] = r2, b[m + 3] = r3;
  }
}

static void absdiff_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) b[i] = a[i] + b[i];
}

// Whether `comm` spans nodes with one rank on each (real nodes, or SHMCOLL_MPI_FAKE_NODES's
// pretend ones): the layer leaves such a communicator to the MPI. Collective.
static int one_rank_on_each_node(MPI_Comm comm) {
  int world_rank = 0, world_size = 1, size = 1, node_key = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_size(comm, &size);
  const char* fake = getenv("SHMCOLL_MPI_FAKE_NODES");
  const int fake_nodes = fake ? atoi(fake) : 0;
  if (fake_nodes > 1) {
    node_key = world_rank / ((world_size + fake_nodes - 1) / fake_nodes);
  } else {
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    node_key = world_rank;
    MPI_Bcast(&node_key, 1, MPI_INT, 0, node);
    MPI_Comm_free(&node);
  }
  int* keys = malloc(sizeof(int) * (size_t)size);
  MPI_Allgather(&node_key, 1, MPI_INT, keys, 1, MPI_INT, comm);
  int distinct = size > 1;
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) distinct = distinct && keys[a] != keys[b];
  }
  free(keys);
  return distinct;
}

// MPICH 4.0.2 crashes on in-place MPI_Reduce at a non-zero root with large counts; where MPICH
// would run it (no layer, a communicator still warming up through PMPI, node by node turned off,
// or one rank on each node) the program takes the same-result out-of-place form. The layer runs
// it itself, on nodes too (their leaders reduce out of place).
static int in_place_reduce_works(int root, int count, int one_rank_each) {
#ifdef MPICH_VERSION
  const int layer_runs_it = shmcoll_mpi_layer_version && !set_to_zero("SHMCOLL_MPI_NODE_BY_NODE") &&
                            set_to_zero("SHMCOLL_MPI_TEAM_AFTER_CALLS") &&
                            set_to_zero("SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS") && !one_rank_each;
  return layer_runs_it || root == 0 || count < 10;
#else
  (void)root, (void)count, (void)one_rank_each;
  return 1;
#endif
}

uint64_t matrix_entry(int rank, int i) {
  return (i % 4 == 3) ? 1 : (uint64_t)(i * 13 + rank * 5 + 1) % 7;
}

void matrix_chain(int last, int count, uint64_t* out) {
  uint64_t left[400];
  for (int i = 0; i < count; ++i) out[i] = matrix_entry(last, i);
  for (int r = last - 1; r >= 0; --r) {  // M0 x (M1 x (... x Mlast))
    for (int i = 0; i < count; ++i) left[i] = matrix_entry(r, i);
    int len = count;
    MPI_Datatype type = MPI_UINT64_T;
    matrix_product(left, out, &len, &type);
  }
}

// Reductions of int64 over `comm`: sum, max, min, band, bor, bxor, in place and not, each root.
static void check_reductions(MPI_Comm comm, int count) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int one_rank_each = one_rank_on_each_node(comm);
  int64_t* send = malloc(sizeof(int64_t) * (count + 1));
  int64_t* recv = malloc(sizeof(int64_t) * (count + 1));
  int64_t* want = malloc(sizeof(int64_t) * (count + 1));
  const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BAND, MPI_BOR, MPI_BXOR};
  for (int o = 0; o < 6; ++o) {
    for (int i = 0; i < count; ++i) {
      send[i] = value(rank, i);
      int64_t w = value(0, i);
      for (int r = 1; r < size; ++r) {
        const int64_t v = value(r, i);
        switch (o) {
          case 0:
            w += v;
            break;
          case 1:
            w = v > w ? v : w;
            break;
          case 2:
            w = v < w ? v : w;
            break;
          case 3:
            w &= v;
            break;
          case 4:
            w |= v;
            break;
          default:
            w ^= v;
            break;
        }
      }
      want[i] = w;
    }
    memset(recv, 0x5a, sizeof(int64_t) * (count + 1));
    MPI_Allreduce(send, recv, count, MPI_INT64_T, ops[o], comm);
    CHECK(memcmp(recv, want, sizeof(int64_t) * count) == 0, "allreduce op %d count %d", o, count);
    absorb(recv, sizeof(int64_t) * (count + 1));
    memcpy(recv, send, sizeof(int64_t) * count);
    MPI_Allreduce(MPI_IN_PLACE, recv, count, MPI_LONG, ops[o], comm);
    CHECK(memcmp(recv, want, sizeof(int64_t) * count) == 0, "in-place allreduce op %d", o);
    for (int root = 0; root < size; ++root) {
      memset(recv, 0x5a, sizeof(int64_t) * (count + 1));
      if (rank == root && (root + o) % 2 == 1 &&
          in_place_reduce_works(root, count, one_rank_each)) {
        memcpy(recv, send, sizeof(int64_t) * count);
        MPI_Reduce(MPI_IN_PLACE, recv, count, MPI_INT64_T, ops[o], root, comm);
      } else {
        MPI_Reduce(send, rank == root ? recv : NULL, count, MPI_INT64_T, ops[o], root, comm);
      }
      if (rank == root) {
        CHECK(memcmp(recv, want, sizeof(int64_t) * count) == 0, "reduce op %d root %d", o, root);
        absorb(recv, sizeof(int64_t) * (count + 1));
      }
    }
  }
  free(send);
  free(recv);
  free(want);
}

static void check_user_ops(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Op matrix, plus;
  MPI_Op_create(matrix_product, 0, &matrix);
  MPI_Op_create(absdiff_sum, 1, &plus);
  for (int count = 4; count <= 400; count *= 10) {  // 1 and 100 matrices
    uint64_t send[400], recv[400], want[400];
    for (int i = 0; i < count; ++i) send[i] = matrix_entry(rank, i);
    matrix_chain(size - 1, count, want);
    MPI_Allreduce(send, recv, count, MPI_UINT64_T, matrix, comm);
    CHECK(memcmp(recv, want, sizeof(uint64_t) * count) == 0, "matrix allreduce %d", count);
    absorb(recv, sizeof(uint64_t) * count);
    memset(recv, 0, sizeof recv);
    MPI_Reduce(send, recv, count, MPI_UINT64_T, matrix, size - 1, comm);
    if (rank == size - 1) CHECK(memcmp(recv, want, sizeof(uint64_t) * count) == 0, "matrix reduce");
  }
  int isend[33], irecv[33];
  for (int i = 0; i < 33; ++i) isend[i] = rank * 100 + i;
  MPI_Allreduce(isend, irecv, 33, MPI_INT, plus, comm);
  for (int i = 0; i < 33; ++i)
    CHECK(irecv[i] == 100 * size * (size - 1) / 2 + size * i, "user sum");
  absorb(irecv, sizeof irecv);
  MPI_Op_free(&matrix);
  MPI_Op_free(&plus);
}

// A barrier lets nobody out before the last rank is in: the first and then the last rank come to
// it 100 ms after the others (who all left an allreduce, so all were past it), and each other
// rank must spend most of that in the barrier. A barrier that lets ranks out early takes
// microseconds; the margin (30 ms of the 100) is for a loaded machine's scheduling.
static void check_barrier_waits(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int late_ranks[] = {0, size - 1};
  for (int k = 0; k < 2; ++k) {
    const int late = late_ranks[k];
    int one = 1, total = 0;
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, comm);
    const double start = MPI_Wtime();
    if (rank == late) {
      const struct timespec pause = {0, 100 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
    MPI_Barrier(comm);
    const double waited = MPI_Wtime() - start;
    CHECK(rank == late || waited > 0.07, "barrier left after %.4f s while rank %d came 0.1 s late",
          waited, late);
  }
}

static void check_bcast_and_barrier(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int counts[] = {0, 1, 30, 1000, 300000};
  for (int c = 0; c < 5; ++c) {
    const int count = counts[c];
    double* data = malloc(sizeof(double) * (count + 1));
    for (int root = 0; root < size; ++root) {
      for (int i = 0; i <= count; ++i) data[i] = rank == root ? root * 1e6 + i : -1.0;
      MPI_Bcast(data, count, MPI_DOUBLE, root, comm);
      int good = data[count] == (rank == root ? root * 1e6 + count : -1.0);
      for (int i = 0; i < count; ++i) good &= data[i] == root * 1e6 + i;
      CHECK(good, "bcast count %d root %d", count, root);
      absorb(data, sizeof(double) * count);
    }
    free(data);
  }
  for (int i = 0; i < 10; ++i) MPI_Barrier(comm);
  check_barrier_waits(comm);
}

// A contiguous derived type in bcast, MAXLOC on a pair type, and Reduce_local.
static void check_other_types(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  int data[8];
  for (int i = 0; i < 8; ++i) data[i] = rank == 0 ? 40 + i : 0;
  MPI_Bcast(data, 4, pair, 0, comm);
  for (int i = 0; i < 8; ++i) CHECK(data[i] == 40 + i, "derived-type bcast");
  MPI_Type_free(&pair);

  struct {
    double value;
    int index;
  } in[3], out[3];
  for (int i = 0; i < 3; ++i) in[i].value = (double)((rank * 7 + i * 3) % 5), in[i].index = rank;
  MPI_Allreduce(in, out, 3, MPI_DOUBLE_INT, MPI_MAXLOC, comm);
  for (int i = 0; i < 3; ++i) {
    double best = -1;
    int where = -1;
    for (int r = 0; r < size; ++r) {
      const double v = (double)((r * 7 + i * 3) % 5);
      if (v > best) best = v, where = r;
    }
    CHECK(out[i].value == best && out[i].index == where, "maxloc %d", i);
    absorb(&out[i].value, sizeof(double));  // not the padding after the index
    absorb(&out[i].index, sizeof(int));
  }

  unsigned char a[100], b[100];
  for (int i = 0; i < 100; ++i) a[i] = (unsigned char)i, b[i] = (unsigned char)(100 + rank);
  MPI_Reduce_local(a, b, 100, MPI_UINT8_T, MPI_SUM);
  for (int i = 0; i < 100; ++i) CHECK(b[i] == 100 + i + rank, "reduce_local");
  absorb(b, sizeof b);
  // Wrapping as C does: Open MPI's op/avx saturates instead (its issue 8045), so this is
  // checked, and kept out of the digest, only with the layer loaded.
  if (shmcoll_mpi_layer_version) {
    for (int i = 0; i < 100; ++i) a[i] = (unsigned char)(200 + i), b[i] = (unsigned char)100;
    MPI_Reduce_local(a, b, 100, MPI_UINT8_T, MPI_SUM);
    for (int i = 0; i < 100; ++i) CHECK(b[i] == (unsigned char)(300 + i), "reduce_local wraps");
  }
}

// Bad roots, counts and types through MPI_ERRORS_RETURN, every rank passing the same ones. The
// error class goes into the digest, so the runs with and without the layer must agree on it (the
// layer raises MPI_ERR_ROOT and MPI_ERR_COUNT, as the MPIs do), and the communicator stays
// usable. Negative counts under MPICH only where the layer serves every call: Debian's MPICH
// 4.0.2 crashes on them; there the layer must say MPI_ERR_COUNT, the class the standard names.
int error_class(int rc) {
  int found = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &found);
  return found;
}

static void expect_class(int rc, int wanted, const char* what) {
  const int found = error_class(rc);
  CHECK(found == wanted, "%s: error class %d, expected %d", what, found, wanted);
  absorb(&found, sizeof found);
}

static void check_errors(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm returning;
  MPI_Comm_dup(comm, &returning);
  MPI_Comm_set_errhandler(returning, MPI_ERRORS_RETURN);
  int data[64], sum[64], counts[64], displs[64];
  for (int i = 0; i < 64; ++i) data[i] = rank, counts[i] = 1, displs[i] = i;
  const MPI_Comm c = returning;
  expect_class(MPI_Bcast(data, 4, MPI_INT, size, c), MPI_ERR_ROOT, "bcast root size");
  expect_class(MPI_Bcast(data, 4, MPI_INT, -5, c), MPI_ERR_ROOT, "bcast root -5");
  expect_class(MPI_Reduce(data, sum, 4, MPI_INT, MPI_SUM, size, c), MPI_ERR_ROOT, "reduce root");
  expect_class(MPI_Gather(data, 1, MPI_INT, sum, 1, MPI_INT, size + 3, c), MPI_ERR_ROOT,
               "gather root");
  expect_class(MPI_Scatter(data, 1, MPI_INT, sum, 1, MPI_INT, -1, c), MPI_ERR_ROOT, "scatter root");
  expect_class(MPI_Scatterv(data, counts, displs, MPI_INT, sum, 1, MPI_INT, size, c), MPI_ERR_ROOT,
               "scatterv root");
  expect_class(MPI_Gatherv(data, 1, MPI_INT, sum, counts, displs, MPI_INT, -2, c), MPI_ERR_ROOT,
               "gatherv root");
  expect_class(MPI_Bcast(data, 4, MPI_DATATYPE_NULL, 0, c), MPI_ERR_TYPE, "bcast null type");
  expect_class(MPI_Allgather(data, 1, MPI_DATATYPE_NULL, sum, 1, MPI_INT, c), MPI_ERR_TYPE,
               "allgather null type");
  expect_class(MPI_Alltoall(data, 1, MPI_INT, sum, 1, MPI_DATATYPE_NULL, c), MPI_ERR_TYPE,
               "alltoall null type");
  // A reduction's type and op are judged as a pair: MPI_ERR_OP in both MPIs.
  expect_class(MPI_Allreduce(data, sum, 4, MPI_DATATYPE_NULL, MPI_SUM, c), MPI_ERR_OP,
               "allreduce null type");
#ifdef MPICH_VERSION
  const int counts_checked = layer_serves_every_call(comm);
#else
  const int counts_checked = 1;
#endif
  if (counts_checked) {
    int found[9] = {error_class(MPI_Allreduce(data, sum, -1, MPI_INT, MPI_SUM, c)),
                    error_class(MPI_Bcast(data, -1, MPI_INT, 0, c)),
                    error_class(MPI_Reduce(data, sum, -2, MPI_INT, MPI_SUM, 0, c)),
                    error_class(MPI_Allgather(data, -1, MPI_INT, sum, -1, MPI_INT, c)),
                    error_class(MPI_Alltoall(data, -1, MPI_INT, sum, -1, MPI_INT, c)),
                    error_class(MPI_Scan(data, sum, -1, MPI_INT, MPI_SUM, c)),
                    error_class(MPI_Reduce_scatter_block(data, sum, -1, MPI_INT, MPI_SUM, c)),
                    error_class(MPI_Scatter(data, -1, MPI_INT, sum, -1, MPI_INT, 0, c)),
                    MPI_ERR_COUNT};
    // Only the root reads gatherv's recvcounts, so only on one rank does every member fail.
    counts[0] = -3;
    if (size == 1)
      found[8] = error_class(MPI_Gatherv(data, 1, MPI_INT, sum, counts, displs, MPI_INT, 0, c));
    counts[0] = 1;
    for (int i = 0; i < 9; ++i)
      CHECK(found[i] == MPI_ERR_COUNT, "negative count %d: class %d", i, found[i]);
  }
  MPI_Allreduce(data, sum, 4, MPI_INT, MPI_SUM, returning);
  CHECK(sum[0] == size * (size - 1) / 2, "allreduce after errors");
  absorb(sum, 4 * sizeof(int));
  MPI_Comm_free(&returning);
}

static void check_all(MPI_Comm comm) {
  check_bcast_and_barrier(comm);
  for (int count = 0; count <= 70000; count = count ? count * 9 : 1) check_reductions(comm, count);
  check_user_ops(comm);
  check_other_types(comm);
  check_fortran_types(comm);
  check_byte_types(comm);
  check_prefix_and_scatter_reductions(comm);
  check_movement(comm);
  check_mixed_type_maps(comm);
  check_alloc_mem(comm);
  check_bottom(comm);
  check_large_count_forms(comm);
  check_errors(comm);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check_all(MPI_COMM_WORLD);
  MPI_Comm halves, reversed;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &halves);
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed);  // rank order reversed
  check_all(halves);
  check_all(reversed);
  // Even world ranks first: on pretend nodes this interleaves the nodes, so a non-commutative op
  // must not be reduced node by node.
  MPI_Comm interleaved;
  MPI_Comm_split(MPI_COMM_WORLD, 0, (rank % 2) * size + rank, &interleaved);
  check_user_ops(interleaved);
  check_reductions(interleaved, 100);
  // ... and blocks gathered, scattered and reduce-scattered across such nodes.
  check_prefix_and_scatter_reductions(interleaved);
  check_movement(interleaved);
  MPI_Comm_free(&halves);
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&interleaved);
  for (int i = 0; i < 40; ++i) {  // many short-lived communicators must not exhaust memory
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int one = 1, total = 0;
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, dup);
    CHECK(total == size, "dup allreduce");
    MPI_Comm_free(&dup);
  }
  print_digest(rank);
  if (rank == 0 && shmcoll_mpi_layer_version) {
    fprintf(stderr, "layer %s loaded\n", shmcoll_mpi_layer_version());
  }
  MPI_Finalize();
  return failures ? 1 : 0;
}
