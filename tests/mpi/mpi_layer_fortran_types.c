// Reductions on Fortran's element types, called from C (the layer serves them whoever calls):
// INTEGER, INTEGER8, REAL, DOUBLE PRECISION, DOUBLE COMPLEX, LOGICAL with the logical operations
// and the pairs 2INTEGER, 2REAL and 2DOUBLE_PRECISION with MAXLOC/MINLOC, in place and not, each
// checked against a reference from the inputs.
// gfortran's layouts: INTEGER and LOGICAL are 4-byte ints (.true. is 1), REAL a float.
#include <complex.h>
#include <stdint.h>

#include "layer_check.h"

enum { kCount = 37 };

static int int_input(int rank, int i) {
  return (rank * 13 + i * 7) % 11 - 5;
}

void check_fortran_types(MPI_Comm comm) {
  int rank, size, integer_bytes = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // An MPI built without Fortran has the handles but not the types (Open MPI's size is
  // MPI_UNDEFINED, and its reductions on them fail): nothing to check there, with or without the
  // layer.
  MPI_Type_size(MPI_INTEGER, &integer_bytes);
  if (integer_bytes != 4) {
    if (rank == 0) fprintf(stderr, "mpi_layer_check: no Fortran types in this MPI: not checked\n");
    return;
  }

  int ints[kCount], int_sums[kCount];
  for (int i = 0; i < kCount; ++i) ints[i] = int_input(rank, i);
  MPI_Allreduce(ints, int_sums, kCount, MPI_INTEGER, MPI_SUM, comm);
  for (int i = 0; i < kCount; ++i) {
    int want = 0;
    for (int r = 0; r < size; ++r) want += int_input(r, i);
    CHECK(int_sums[i] == want, "MPI_INTEGER sum %d", i);
  }
  absorb(int_sums, sizeof int_sums);
  MPI_Allreduce(MPI_IN_PLACE, ints, kCount, MPI_INTEGER, MPI_MAX, comm);  // in place
  for (int i = 0; i < kCount; ++i) {
    int want = int_input(0, i);
    for (int r = 1; r < size; ++r) want = int_input(r, i) > want ? int_input(r, i) : want;
    CHECK(ints[i] == want, "MPI_INTEGER max in place %d", i);
  }

  int64_t longs[kCount], long_products[kCount];
  for (int i = 0; i < kCount; ++i) longs[i] = int_input(rank, i) + 7;
  MPI_Reduce(longs, long_products, kCount, MPI_INTEGER8, MPI_PROD, size - 1, comm);
  if (rank == size - 1) {
    for (int i = 0; i < kCount; ++i) {
      int64_t want = 1;
      for (int r = 0; r < size; ++r) want *= int_input(r, i) + 7;
      CHECK(long_products[i] == want, "MPI_INTEGER8 prod %d", i);
    }
    absorb(long_products, sizeof long_products);
  }

  // Small integers in float and double: every sum is exact, whatever the order.
  float reals[kCount], real_sums[kCount];
  double doubles[kCount], double_mins[kCount];
  for (int i = 0; i < kCount; ++i) reals[i] = (float)int_input(rank, i) * 0.5f;
  for (int i = 0; i < kCount; ++i) doubles[i] = int_input(rank, i) * 0.25;
  MPI_Allreduce(reals, real_sums, kCount, MPI_REAL, MPI_SUM, comm);
  MPI_Allreduce(doubles, double_mins, kCount, MPI_DOUBLE_PRECISION, MPI_MIN, comm);
  for (int i = 0; i < kCount; ++i) {
    float want_sum = 0;
    double want_min = int_input(0, i) * 0.25;
    for (int r = 0; r < size; ++r) {
      want_sum += (float)int_input(r, i) * 0.5f;
      if (int_input(r, i) * 0.25 < want_min) want_min = int_input(r, i) * 0.25;
    }
    CHECK(real_sums[i] == want_sum, "MPI_REAL sum %d", i);
    CHECK(double_mins[i] == want_min, "MPI_DOUBLE_PRECISION min %d", i);
  }
  absorb(real_sums, sizeof real_sums);
  absorb(double_mins, sizeof double_mins);

  double _Complex complexes[kCount];
  for (int i = 0; i < kCount; ++i) complexes[i] = int_input(rank, i) + 2.0 * I * (rank + i);
  MPI_Allreduce(MPI_IN_PLACE, complexes, kCount, MPI_DOUBLE_COMPLEX, MPI_SUM, comm);
  for (int i = 0; i < kCount; ++i) {
    double _Complex want = 0;
    for (int r = 0; r < size; ++r) want += int_input(r, i) + 2.0 * I * (r + i);
    CHECK(complexes[i] == want, "MPI_DOUBLE_COMPLEX sum %d", i);
  }
  absorb(complexes, sizeof complexes);

  // LOGICAL: .true. is 1; and, or and xor give .true. or .false.
  int logicals[kCount], all[kCount], any[kCount], odd[kCount];
  for (int i = 0; i < kCount; ++i) logicals[i] = (rank + i) % 3 != 0;
  MPI_Allreduce(logicals, all, kCount, MPI_LOGICAL, MPI_LAND, comm);
  MPI_Allreduce(logicals, any, kCount, MPI_LOGICAL, MPI_LOR, comm);
  MPI_Allreduce(logicals, odd, kCount, MPI_LOGICAL, MPI_LXOR, comm);
  for (int i = 0; i < kCount; ++i) {
    int want_all = 1, want_any = 0, want_odd = 0;
    for (int r = 0; r < size; ++r) {
      const int value = (r + i) % 3 != 0;
      want_all &= value, want_any |= value, want_odd ^= value;
    }
    CHECK(all[i] == want_all && any[i] == want_any && odd[i] == want_odd, "MPI_LOGICAL %d", i);
  }
  absorb(all, sizeof all);
  absorb(any, sizeof any);
  absorb(odd, sizeof odd);

  // 2INTEGER with MAXLOC: the largest value, and the lowest index holding it.
  int pairs[2 * kCount], best[2 * kCount];
  for (int i = 0; i < kCount; ++i) pairs[2 * i] = int_input(rank, i) / 3, pairs[2 * i + 1] = rank;
  MPI_Allreduce(pairs, best, kCount, MPI_2INTEGER, MPI_MAXLOC, comm);
  for (int i = 0; i < kCount; ++i) {
    int value = int_input(0, i) / 3, where = 0;
    for (int r = 1; r < size; ++r) {
      if (int_input(r, i) / 3 > value) value = int_input(r, i) / 3, where = r;
    }
    CHECK(best[2 * i] == value && best[2 * i + 1] == where, "MPI_2INTEGER maxloc %d", i);
  }
  absorb(best, sizeof best);

  // 2REAL with MINLOC and 2DOUBLE_PRECISION with MAXLOC: the index has the value's type.
  float real_pairs[2 * kCount], real_best[2 * kCount];
  double double_pairs[2 * kCount];
  for (int i = 0; i < kCount; ++i) {
    real_pairs[2 * i] = (float)(int_input(rank, i) / 3), real_pairs[2 * i + 1] = (float)rank;
    double_pairs[2 * i] = int_input(rank, i) / 3, double_pairs[2 * i + 1] = rank;
  }
  MPI_Allreduce(real_pairs, real_best, kCount, MPI_2REAL, MPI_MINLOC, comm);
  MPI_Allreduce(MPI_IN_PLACE, double_pairs, kCount, MPI_2DOUBLE_PRECISION, MPI_MAXLOC, comm);
  for (int i = 0; i < kCount; ++i) {
    int low = int_input(0, i) / 3, low_at = 0, high = low, high_at = 0;
    for (int r = 1; r < size; ++r) {
      if (int_input(r, i) / 3 < low) low = int_input(r, i) / 3, low_at = r;
      if (int_input(r, i) / 3 > high) high = int_input(r, i) / 3, high_at = r;
    }
    CHECK(real_best[2 * i] == low && real_best[2 * i + 1] == low_at, "MPI_2REAL minloc %d", i);
    CHECK(double_pairs[2 * i] == high && double_pairs[2 * i + 1] == high_at,
          "MPI_2DOUBLE_PRECISION maxloc in place %d", i);
  }
  absorb(real_best, sizeof real_best);
  absorb(double_pairs, sizeof double_pairs);
}
