// Reductions beyond the standard's type table, which the layer serves wherever the MPI itself
// accepts them and with the MPI's meaning (issue 23): MPI_CHAR (OSU's default type),
// MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_CHARACTER; and what both MPIs refuse
// (MPI_WCHAR, predefined ops on derived datatypes), which must fail with the same error class
// with and without the layer. Every result is checked against a reference from the inputs.
#include <stdlib.h>

#include "layer_check.h"

enum { kCount = 40 };

static int small_input(int rank, int i) {
  return (rank + i) % 3;
}

static void check_char(MPI_Comm comm, int rank, int size) {
  char letters[kCount], totals[kCount];
  for (int i = 0; i < kCount; ++i) letters[i] = (char)small_input(rank, i);
  MPI_Allreduce(letters, totals, kCount, MPI_CHAR, MPI_SUM, comm);
  for (int i = 0; i < kCount; ++i) {
    int want = 0;
    for (int r = 0; r < size; ++r) want += small_input(r, i);
    CHECK(totals[i] == (char)want, "MPI_CHAR sum %d", i);
  }
  absorb(totals, sizeof totals);
  MPI_Reduce(letters, totals, kCount, MPI_CHAR, MPI_MAX, size - 1, comm);
  if (rank == size - 1) {
    for (int i = 0; i < kCount; ++i) {
      int want = 0;
      for (int r = 0; r < size; ++r) want = small_input(r, i) > want ? small_input(r, i) : want;
      CHECK(totals[i] == (char)want, "MPI_CHAR max %d", i);
    }
    absorb(totals, sizeof totals);
  }
  // osu_reduce_scatter and osu_reduce_scatter_block's calls: 5 per rank, up to 8 ranks.
  char block[5];
  int block_counts[8];
  if (size > 8) return;
  for (int r = 0; r < size; ++r) block_counts[r] = 5;
  MPI_Reduce_scatter_block(letters, block, 5, MPI_CHAR, MPI_SUM, comm);
  MPI_Reduce_scatter(letters, totals, block_counts, MPI_CHAR, MPI_SUM, comm);
  for (int i = 0; i < 5; ++i) {
    int want = 0;
    for (int r = 0; r < size; ++r) want += small_input(r, rank * 5 + i);
    CHECK(block[i] == (char)want && totals[i] == (char)want, "MPI_CHAR reduce_scatter %d", i);
  }
  absorb(block, sizeof block);
  absorb(totals, 5);
  // Overflowing sums wrap as C's char arithmetic does (with the layer only: Open MPI's op/avx may
  // saturate 8-bit sums, its issue 8045). Not on pretend nodes: there the step between nodes is
  // the MPI's own reduction among the node leaders.
  if (layer_serves_every_call(comm)) {
    for (int i = 0; i < kCount; ++i) letters[i] = (char)100;
    MPI_Allreduce(letters, totals, kCount, MPI_CHAR, MPI_SUM, comm);
    for (int i = 0; i < kCount; ++i)
      CHECK(totals[i] == (char)(100 * size), "MPI_CHAR sum wraps %d: %d", i, totals[i]);
  }
}

static void check_signed_and_unsigned_char(MPI_Comm comm, int rank, int size) {
  signed char s[kCount], s_min[kCount];
  for (int i = 0; i < kCount; ++i) s[i] = (signed char)(small_input(rank, i) * 40 - 60);
  MPI_Allreduce(s, s_min, kCount, MPI_SIGNED_CHAR, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, s, kCount, MPI_SIGNED_CHAR, MPI_SUM, comm);
  for (int i = 0; i < kCount; ++i) {
    int want_min = 127, want_sum = 0;
    for (int r = 0; r < size; ++r) {
      const int v = small_input(r, i) * 40 - 60;
      want_min = v < want_min ? v : want_min, want_sum += v;
    }
    CHECK(s_min[i] == want_min, "MPI_SIGNED_CHAR min %d", i);
    CHECK(s[i] == (signed char)want_sum, "MPI_SIGNED_CHAR sum in place %d", i);
  }
  absorb(s_min, sizeof s_min);
  absorb(s, sizeof s);

  // Values below 128 in the digest: Debian's MPICH 4.0.2 compares MPI_UNSIGNED_CHAR as signed
  // (its MPI_MAX of 0x80 and 0x01 is 0x01), so it agrees with the standard only there.
  unsigned char u[kCount], u_max[kCount];
  for (int i = 0; i < kCount; ++i) u[i] = (unsigned char)(small_input(rank, i) * 30 + 5);
  MPI_Reduce(u, u_max, kCount, MPI_UNSIGNED_CHAR, MPI_MAX, 0, comm);
  MPI_Allreduce(MPI_IN_PLACE, u, kCount, MPI_UNSIGNED_CHAR, MPI_BOR, comm);
  for (int i = 0; i < kCount; ++i) {
    int want_max = 0, want_or = 0;
    for (int r = 0; r < size; ++r) {
      const int v = small_input(r, i) * 30 + 5;
      want_max = v > want_max ? v : want_max, want_or |= v;
    }
    if (rank == 0) CHECK(u_max[i] == want_max, "MPI_UNSIGNED_CHAR max %d", i);
    CHECK(u[i] == want_or, "MPI_UNSIGNED_CHAR bor in place %d", i);
  }
  if (rank == 0) absorb(u_max, sizeof u_max);
  absorb(u, sizeof u);
  // The standard's unsigned order, with the layer only.
  if (layer_serves_every_call(comm)) {
    for (int i = 0; i < kCount; ++i) u[i] = (unsigned char)(rank == 0 ? 200 : 100);
    MPI_Allreduce(MPI_IN_PLACE, u, kCount, MPI_UNSIGNED_CHAR, MPI_MAX, comm);
    for (int i = 0; i < kCount; ++i) CHECK(u[i] == 200, "MPI_UNSIGNED_CHAR max of 200: %d", u[i]);
  }
}

// MPI_BYTE and MPI_CHARACTER: the standard gives MPI_BYTE the bitwise ops only and MPI_CHARACTER
// none; Open MPI accepts arithmetic on both, MPICH on MPI_CHARACTER. Where the MPI refuses, the
// error class goes into the digest; where it accepts, the result, in the MPI's own order (asked
// of the MPI directly with PMPI_Reduce_local, which the layer does not intercept).
static void check_loose_bytes(MPI_Comm returning, int rank, int size) {
  // Where MPI_Reduce_local reports its errors differs between MPI versions.
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Datatype types[2] = {MPI_BYTE, MPI_CHARACTER};
  for (int t = 0; t < 2; ++t) {
    if (types[t] == MPI_DATATYPE_NULL) continue;
    unsigned char in[kCount], out[kCount];
    for (int i = 0; i < kCount; ++i) in[i] = (unsigned char)(small_input(rank, i) + 1);
    const int sum_class = error_class(MPI_Allreduce(in, out, kCount, types[t], MPI_SUM, returning));
    absorb(&sum_class, sizeof sum_class);
    if (sum_class == MPI_SUCCESS) {
      for (int i = 0; i < kCount; ++i) {
        int want = 0;
        for (int r = 0; r < size; ++r) want += small_input(r, i) + 1;
        CHECK(out[i] == want, "sum of one-byte type %d, %d", t, i);
      }
      absorb(out, sizeof out);
    }
    const unsigned char high = 0x80;
    unsigned char order = 0x01;
    if (PMPI_Reduce_local(&high, &order, 1, types[t], MPI_MAX) != MPI_SUCCESS) continue;
    // 0x80 on rank 0, 0x01 elsewhere: the MPI's own order says which is larger.
    for (int i = 0; i < kCount; ++i) in[i] = rank == 0 ? 0x80 : 0x01;
    MPI_Allreduce(MPI_IN_PLACE, in, kCount, types[t], MPI_MAX, returning);
    for (int i = 0; i < kCount; ++i) CHECK(in[i] == (size > 1 ? order : 0x80), "max order %d", t);
    absorb(in, sizeof in);
  }
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

// Refused by both MPIs: MPI_WCHAR with MPI_SUM, and predefined ops on derived datatypes
// (contiguous and vector, in place and not). A user op on a derived type is legal: it goes to
// PMPI through the layer (the verbose table names why) and gives the same result.
static void sum_pairs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < 2 * *len; ++i) b[i] += a[i];
}

static void check_refusals(MPI_Comm returning, int rank, int size) {
  wchar_t wide[4] = {1, 2, 3, 4}, wide_sum[4];
  int classes[6];
  classes[0] = error_class(MPI_Allreduce(wide, wide_sum, 4, MPI_WCHAR, MPI_SUM, returning));

  MPI_Datatype four_floats, every_other_int, int_pair;
  MPI_Type_contiguous(4, MPI_FLOAT, &four_floats);
  MPI_Type_vector(2, 1, 2, MPI_INT, &every_other_int);
  MPI_Type_contiguous(2, MPI_INT, &int_pair);
  MPI_Type_commit(&four_floats);
  MPI_Type_commit(&every_other_int);
  MPI_Type_commit(&int_pair);
  float floats[8] = {1, 2, 3, 4, 5, 6, 7, 8}, float_sums[8];
  int ints[8] = {1, 2, 3, 4, 5, 6, 7, 8}, int_max[8];
  classes[1] = error_class(MPI_Allreduce(floats, float_sums, 2, four_floats, MPI_SUM, returning));
  classes[2] = error_class(MPI_Allreduce(MPI_IN_PLACE, floats, 2, four_floats, MPI_SUM, returning));
  classes[3] = error_class(MPI_Reduce(ints, int_max, 2, every_other_int, MPI_MAX, 0, returning));
  classes[4] =
      error_class(MPI_Allreduce(MPI_IN_PLACE, ints, 2, every_other_int, MPI_MAX, returning));
  for (int c = 0; c < 5; ++c) CHECK(classes[c] != MPI_SUCCESS, "refusal %d was accepted", c);
  absorb(classes, 5 * sizeof(int));

  MPI_Op pair_sum;
  MPI_Op_create(sum_pairs, 1, &pair_sum);
  int pairs[6], pair_totals[6];
  for (int i = 0; i < 6; ++i) pairs[i] = rank * 10 + i;
  classes[5] = error_class(MPI_Allreduce(pairs, pair_totals, 3, int_pair, pair_sum, returning));
  CHECK(classes[5] == MPI_SUCCESS, "user op on a derived type");
  for (int i = 0; i < 6; ++i) {
    int want = 0;
    for (int r = 0; r < size; ++r) want += r * 10 + i;
    CHECK(pair_totals[i] == want, "user op on a derived type %d", i);
  }
  absorb(pair_totals, sizeof pair_totals);
  MPI_Op_free(&pair_sum);
  MPI_Type_free(&four_floats);
  MPI_Type_free(&every_other_int);
  MPI_Type_free(&int_pair);
}

void check_byte_types(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  check_char(comm, rank, size);
  check_signed_and_unsigned_char(comm, rank, size);
  MPI_Comm returning;
  MPI_Comm_dup(comm, &returning);
  MPI_Comm_set_errhandler(returning, MPI_ERRORS_RETURN);
  check_loose_bytes(returning, rank, size);
  check_refusals(returning, rank, size);
  MPI_Comm_free(&returning);
}
