// Reduce_scatter, Reduce_scatter_block, Scan and Exscan through the MPI layer, in place and not,
// with a predefined op, a non-commutative user op and a user op on a derived type, each checked
// against a reference computed from the inputs.
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

static int64_t input(int rank, int i) {
  return (int64_t)((rank * 31 + i * 17) % 101) - 50;
}

// The sum over ranks [first, last] of input(rank, i).
static int64_t sum_of(int first, int last, int i) {
  int64_t sum = 0;
  for (int r = first; r <= last; ++r) sum += input(r, i);
  return sum;
}

static void check_reduce_scatter(MPI_Comm comm, int rank, int size, int base) {
  int* counts = malloc(sizeof(int) * size);
  int total = 0, start = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = (r % 3) * base + (r == 1);  // some blocks empty
    if (r < rank) start += counts[r];
    total += counts[r];
  }
  const int block = base + 1;  // reduce_scatter_block's
  const int longest = total > block ? total : block;
  int64_t* send = malloc(sizeof(int64_t) * (total + 1));
  int64_t* recv = malloc(sizeof(int64_t) * (longest + 1));
  for (int in_place = 0; in_place < 2; ++in_place) {
    for (int i = 0; i < total; ++i) send[i] = input(rank, i);
    for (int i = 0; i <= total; ++i) recv[i] = -999;
    if (in_place) {
      memcpy(recv, send, sizeof(int64_t) * total);
      MPI_Reduce_scatter(MPI_IN_PLACE, recv, counts, MPI_INT64_T, MPI_SUM, comm);
    } else {
      MPI_Reduce_scatter(send, recv, counts, MPI_INT64_T, MPI_SUM, comm);
    }
    int good = in_place || recv[counts[rank]] == -999;
    for (int i = 0; i < counts[rank]; ++i) good &= recv[i] == sum_of(0, size - 1, start + i);
    CHECK(good, "reduce_scatter base %d in_place %d", base, in_place);
    absorb(recv, sizeof(int64_t) * counts[rank]);

    int64_t* whole = malloc(sizeof(int64_t) * block * size);
    for (int i = 0; i < block * size; ++i) whole[i] = input(rank, i);
    if (in_place) {
      MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, block, MPI_LONG, MPI_SUM, comm);
      memcpy(recv, whole, sizeof(int64_t) * block);
    } else {
      MPI_Reduce_scatter_block(whole, recv, block, MPI_LONG, MPI_SUM, comm);
    }
    good = 1;
    for (int i = 0; i < block; ++i) good &= recv[i] == sum_of(0, size - 1, rank * block + i);
    CHECK(good, "reduce_scatter_block base %d in_place %d", base, in_place);
    absorb(recv, sizeof(int64_t) * block);
    free(whole);
  }
  free(counts);
  free(send);
  free(recv);
}

static void check_scans(MPI_Comm comm, int rank, int count) {
  int64_t* send = malloc(sizeof(int64_t) * (count + 1));
  int64_t* recv = malloc(sizeof(int64_t) * (count + 1));
  for (int in_place = 0; in_place < 2; ++in_place) {
    for (int exclusive = 0; exclusive < 2; ++exclusive) {
      for (int i = 0; i < count; ++i) send[i] = input(rank, i);
      for (int i = 0; i <= count; ++i) recv[i] = -999;
      if (in_place) memcpy(recv, send, sizeof(int64_t) * count);
      const void* from = in_place ? MPI_IN_PLACE : send;
      if (exclusive) {
        MPI_Exscan(from, recv, count, MPI_INT64_T, MPI_SUM, comm);
      } else {
        MPI_Scan(from, recv, count, MPI_INT64_T, MPI_SUM, comm);
      }
      // Exscan's result on rank 0 is undefined: neither checked nor digested.
      if (exclusive && rank == 0) continue;
      int good = recv[count] == -999;
      for (int i = 0; i < count; ++i) good &= recv[i] == sum_of(0, rank - exclusive, i);
      CHECK(good, "scan count %d in_place %d exclusive %d", count, in_place, exclusive);
      absorb(recv, sizeof(int64_t) * count);
    }
  }
  free(send);
  free(recv);
}

// Scan with the matrix product: rank r gets M0 x ... x Mr, in rank order.
static void check_ordered_scan(MPI_Comm comm, int rank) {
  MPI_Op matrix;
  MPI_Op_create(matrix_product, 0, &matrix);
  enum { kCount = 40 };  // 10 matrices
  uint64_t send[kCount], recv[kCount], want[kCount];
  for (int i = 0; i < kCount; ++i) send[i] = matrix_entry(rank, i);
  matrix_chain(rank, kCount, want);
  MPI_Scan(send, recv, kCount, MPI_UINT64_T, matrix, comm);
  CHECK(memcmp(recv, want, sizeof recv) == 0, "matrix scan");
  absorb(recv, sizeof recv);
  if (rank > 0) {  // exscan: M0 x ... x Mr-1, in place
    memcpy(recv, send, sizeof recv);
    matrix_chain(rank - 1, kCount, want);
  }
  MPI_Exscan(MPI_IN_PLACE, recv, kCount, MPI_UINT64_T, matrix, comm);
  if (rank > 0) {
    CHECK(memcmp(recv, want, sizeof recv) == 0, "matrix exscan in place");
    absorb(recv, sizeof recv);
  }
  MPI_Op_free(&matrix);
}

// Elementwise sum of triples of ints: a user op on a derived type (the layer hands it to MPI).
static void triple_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < 3 * *len; ++i) b[i] += a[i];
}

static void check_derived_reduction(MPI_Comm comm, int rank, int size) {
  MPI_Datatype triple;
  MPI_Type_contiguous(3, MPI_INT, &triple);
  MPI_Type_commit(&triple);
  MPI_Op sum;
  MPI_Op_create(triple_sum, 1, &sum);
  int send[30], recv[30];
  for (int i = 0; i < 30; ++i) send[i] = rank * 7 + i;
  MPI_Allreduce(send, recv, 10, triple, sum, comm);
  for (int i = 0; i < 30; ++i) CHECK(recv[i] == 7 * size * (size - 1) / 2 + size * i, "triple");
  absorb(recv, sizeof recv);
  MPI_Scan(send, recv, 10, triple, sum, comm);
  for (int i = 0; i < 30; ++i) CHECK(recv[i] == 7 * rank * (rank + 1) / 2 + (rank + 1) * i, "scan");
  absorb(recv, sizeof recv);
  MPI_Op_free(&sum);
  MPI_Type_free(&triple);
}

void check_prefix_and_scatter_reductions(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int base = 0; base <= 9000; base = base ? base * 30 : 10) {
    check_reduce_scatter(comm, rank, size, base);
  }
  for (int count = 0; count <= 70000; count = count ? count * 9 : 1) check_scans(comm, rank, count);
  check_ordered_scan(comm, rank);
  check_derived_reduction(comm, rank, size);
}
