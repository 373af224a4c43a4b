// The data-movement collectives through the MPI layer: every root, in place and not, zero
// counts, gaps between v-blocks (which must stay untouched), and derived datatypes on one side
// only (a matrix column, a subarray, a struct), each checked against what the inputs say.
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

enum { kUntouched = -7 };

// Item i of the block rank `from` sends to rank `to`.
static int item(int from, int to, int i) {
  return from * 10000000 + to * 100000 + i;
}

static int* filled(int count, int value) {
  int* data = malloc(sizeof(int) * (count + 1));
  for (int i = 0; i <= count; ++i) data[i] = value;
  return data;
}

// Whether data[0..count) holds the block from -> to.
static int holds_block(const int* data, int count, int from, int to) {
  for (int i = 0; i < count; ++i) {
    if (data[i] != item(from, to, i)) return 0;
  }
  return 1;
}

// Peer bugs on one rank, found by this program: MPICH 4.0.2's MPI_Allgatherv ignores displs,
// and Open MPI 4.1.4's MPI_Alltoallw reads byte displacements as counts of elements. Where both
// readings agree (a first block at displacement 0) the run without the layer is right too.
static int leading_gap(int size, int gap) {
  return size == 1 ? 0 : gap;
}

// v-layouts: block r has (r % 3) * base + 1 elements, with a gap of 2 before it.
static int layout(int size, int base, int* counts, int* displs) {
  int at = 0;
  for (int r = 0; r < size; ++r) {
    at += r == 0 ? leading_gap(size, 2) : 2;
    counts[r] = (r % 3) * base + 1;
    displs[r] = at;
    at += counts[r];
  }
  return at;
}

static void check_scatter_gather(MPI_Comm comm, int rank, int size, int count) {
  for (int root = 0; root < size; ++root) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      const int keeps_own = in_place && rank == root;
      int* all = filled(count * size, kUntouched);
      int* own = filled(count, kUntouched);
      for (int d = 0; d < size; ++d) {
        for (int i = 0; i < count; ++i) all[d * count + i] = item(root, d, i);
      }
      // Arguments the standard makes insignificant get a null handle.
      MPI_Scatter(all, count, MPI_INT, keeps_own ? MPI_IN_PLACE : own, count,
                  keeps_own ? MPI_DATATYPE_NULL : MPI_INT, root, comm);
      if (!keeps_own) {
        CHECK(holds_block(own, count, root, rank) && own[count] == kUntouched,
              "scatter count %d root %d", count, root);
        absorb(own, sizeof(int) * count);
      }

      for (int i = 0; i < count; ++i) own[i] = item(rank, root, i);
      for (int i = 0; i <= count * size; ++i) all[i] = kUntouched;
      if (keeps_own) memcpy(all + root * count, own, sizeof(int) * count);
      MPI_Gather(keeps_own ? MPI_IN_PLACE : own, count, keeps_own ? MPI_DATATYPE_NULL : MPI_INT,
                 all, count, MPI_INT, root, comm);
      if (rank == root) {
        int good = all[count * size] == kUntouched;
        for (int r = 0; r < size; ++r) good &= holds_block(all + r * count, count, r, root);
        CHECK(good, "gather count %d root %d in_place %d", count, root, in_place);
        absorb(all, sizeof(int) * count * size);
      }
      free(all);
      free(own);
    }
  }
}

static void check_scatterv_gatherv(MPI_Comm comm, int rank, int size, int base) {
  int* counts = malloc(sizeof(int) * size);
  int* displs = malloc(sizeof(int) * size);
  const int span = layout(size, base, counts, displs);
  for (int root = 0; root < size; ++root) {
    const int keeps_own = rank == root && root % 2 == 1;  // in place at odd roots
    int* all = filled(span, kUntouched);
    int* own = filled(counts[rank], kUntouched);
    for (int d = 0; d < size; ++d) {
      for (int i = 0; i < counts[d]; ++i) all[displs[d] + i] = item(root, d, i);
    }
    MPI_Scatterv(all, counts, displs, MPI_INT, keeps_own ? MPI_IN_PLACE : own, counts[rank],
                 MPI_INT, root, comm);
    if (!keeps_own) {
      CHECK(holds_block(own, counts[rank], root, rank) && own[counts[rank]] == kUntouched,
            "scatterv base %d root %d", base, root);
      absorb(own, sizeof(int) * counts[rank]);
    }

    for (int i = 0; i < counts[rank]; ++i) own[i] = item(rank, root, i);
    for (int i = 0; i <= span; ++i) all[i] = kUntouched;
    if (keeps_own) memcpy(all + displs[root], own, sizeof(int) * counts[root]);
    MPI_Gatherv(keeps_own ? MPI_IN_PLACE : own, counts[rank], MPI_INT, all, counts, displs, MPI_INT,
                root, comm);
    if (rank == root) {
      int good = 1;
      for (int r = 0; r < size; ++r) {
        good &= holds_block(all + displs[r], counts[r], r, root);
        good &= displs[r] == 0 ||
                (all[displs[r] - 1] == kUntouched && all[displs[r] - 2] == kUntouched);
      }
      CHECK(good, "gatherv base %d root %d", base, root);
      absorb(all, sizeof(int) * span);
    }
    free(all);
    free(own);
  }
  free(counts);
  free(displs);
}

static void check_allgathers(MPI_Comm comm, int rank, int size, int base) {
  int* counts = malloc(sizeof(int) * size);
  int* displs = malloc(sizeof(int) * size);
  const int span = layout(size, base, counts, displs);
  for (int in_place = 0; in_place < 2; ++in_place) {
    int* own = filled(base, kUntouched);
    int* all = filled(span > base * size ? span : base * size, kUntouched);
    for (int i = 0; i < base; ++i) own[i] = item(rank, 0, i);
    if (in_place) memcpy(all + rank * base, own, sizeof(int) * base);
    MPI_Allgather(in_place ? MPI_IN_PLACE : own, base, in_place ? MPI_DATATYPE_NULL : MPI_INT, all,
                  base, MPI_INT, comm);
    int good = 1;
    for (int r = 0; r < size; ++r) good &= holds_block(all + r * base, base, r, 0);
    CHECK(good, "allgather base %d in_place %d", base, in_place);
    absorb(all, sizeof(int) * base * size);

    free(own);
    own = filled(counts[rank], kUntouched);
    for (int i = 0; i < counts[rank]; ++i) own[i] = item(rank, 1, i);
    for (int i = 0; i < span; ++i) all[i] = kUntouched;
    if (in_place) memcpy(all + displs[rank], own, sizeof(int) * counts[rank]);
    MPI_Allgatherv(in_place ? MPI_IN_PLACE : own, counts[rank], MPI_INT, all, counts, displs,
                   MPI_INT, comm);
    good = 1;
    for (int r = 0; r < size; ++r) {
      good &= holds_block(all + displs[r], counts[r], r, 1);
      good &= displs[r] == 0 || all[displs[r] - 1] == kUntouched;
    }
    CHECK(good, "allgatherv base %d in_place %d", base, in_place);
    absorb(all, sizeof(int) * span);
    free(own);
    free(all);
  }
  free(counts);
  free(displs);
}

// Elements rank s sends rank d in alltoallv: symmetric, so the in-place form (which sends from
// the receive layout) has matching counts.
static int pair_count(int s, int d, int base) {
  return ((s + d) % 3) * base + (s == d);
}

static void check_alltoalls(MPI_Comm comm, int rank, int size, int base) {
  for (int in_place = 0; in_place < 2; ++in_place) {
    int* send = filled(base * size, kUntouched);
    int* recv = filled(base * size, kUntouched);
    for (int d = 0; d < size; ++d) {
      for (int i = 0; i < base; ++i) send[d * base + i] = item(rank, d, i);
    }
    if (in_place) memcpy(recv, send, sizeof(int) * base * size);
    MPI_Alltoall(in_place ? MPI_IN_PLACE : send, base, in_place ? MPI_DATATYPE_NULL : MPI_INT, recv,
                 base, MPI_INT, comm);
    int good = recv[base * size] == kUntouched;
    for (int s = 0; s < size; ++s) good &= holds_block(recv + s * base, base, s, rank);
    CHECK(good, "alltoall base %d in_place %d", base, in_place);
    absorb(recv, sizeof(int) * base * size);
    free(send);
    free(recv);

    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    int span = 0;
    for (int peer = 0; peer < size; ++peer) {
      counts[peer] = pair_count(rank, peer, base);
      displs[peer] = span + 3;  // a gap before every block
      span = displs[peer] + counts[peer];
    }
    send = filled(span, kUntouched);
    recv = filled(span, kUntouched);
    for (int d = 0; d < size; ++d) {
      for (int i = 0; i < counts[d]; ++i) send[displs[d] + i] = item(rank, d, i);
    }
    if (in_place) memcpy(recv, send, sizeof(int) * span);
    MPI_Alltoallv(in_place ? MPI_IN_PLACE : send, counts, displs, MPI_INT, recv, counts, displs,
                  MPI_INT, comm);
    good = 1;
    for (int s = 0; s < size; ++s) {
      good &= holds_block(recv + displs[s], counts[s], s, rank);
      good &= recv[displs[s] - 1] == kUntouched;
    }
    CHECK(good, "alltoallv base %d in_place %d", base, in_place);
    absorb(recv, sizeof(int) * span);
    free(send);
    free(recv);
    free(counts);
    free(displs);
  }
}

// Alltoallw: ints to even-numbered pair sums, doubles to odd ones, at byte displacements. Blocks
// are sent in reverse peer order and received in peer order, so the two layouts differ.
static void check_alltoallw(MPI_Comm comm, int rank, int size, int base) {
  int *counts = malloc(sizeof(int) * size), *bytes_at = malloc(sizeof(int) * size);
  int* send_at = malloc(sizeof(int) * size);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * size);
  int span = 0, send_span = 0;
  for (int peer = 0; peer < size; ++peer) {
    counts[peer] = pair_count(rank, peer, base);
    types[peer] = (rank + peer) % 2 ? MPI_DOUBLE : MPI_INT;
    bytes_at[peer] = span + (peer == 0 ? leading_gap(size, 8) : 8);
    span = bytes_at[peer] + counts[peer] * 8;
  }
  for (int peer = size - 1; peer >= 0; --peer) {
    send_at[peer] = send_span + (peer == size - 1 ? leading_gap(size, 16) : 16);
    send_span = send_at[peer] + counts[peer] * 8;
  }
  for (int in_place = 0; in_place < 2; ++in_place) {
    // In place, blocks are sent from where they are received.
    const int* from = in_place ? bytes_at : send_at;
    char* send = calloc(in_place ? span : send_span, 1);
    char* recv = calloc(span, 1);
    for (int d = 0; d < size; ++d) {
      for (int i = 0; i < counts[d]; ++i) {
        if (types[d] == MPI_INT) {
          ((int*)(send + from[d]))[i] = item(rank, d, i);
        } else {
          ((double*)(send + from[d]))[i] = item(rank, d, i) + 0.5;
        }
      }
    }
    if (in_place) memcpy(recv, send, span);
    MPI_Alltoallw(in_place ? MPI_IN_PLACE : send, counts, send_at, types, recv, counts, bytes_at,
                  types, comm);
    int good = 1;
    for (int s = 0; s < size; ++s) {
      for (int i = 0; i < counts[s]; ++i) {
        if (types[s] == MPI_INT) {
          good &= ((int*)(recv + bytes_at[s]))[i] == item(s, rank, i);
        } else {
          good &= ((double*)(recv + bytes_at[s]))[i] == item(s, rank, i) + 0.5;
        }
      }
    }
    CHECK(good, "alltoallw base %d in_place %d", base, in_place);
    absorb(recv, span);
    free(send);
    free(recv);
  }
  free(counts);
  free(bytes_at);
  free(send_at);
  free(types);
}

// A matrix of `rows` x size ints at the root, one column per rank: scattered with a column type
// (a vector resized to one int, so column r starts at int r), gathered back transposed.
static void check_column_types(MPI_Comm comm, int rank, int size) {
  enum { kRows = 5 };
  MPI_Datatype vector, column;
  MPI_Type_vector(kRows, 1, size, MPI_INT, &vector);
  MPI_Type_create_resized(vector, 0, sizeof(int), &column);
  MPI_Type_commit(&column);
  int* matrix = filled(kRows * size, kUntouched);
  for (int row = 0; row < kRows; ++row) {
    for (int c = 0; c < size; ++c) matrix[row * size + c] = item(c, row, 0);
  }
  int mine[kRows];
  MPI_Scatter(matrix, 1, column, mine, kRows, MPI_INT, 0, comm);
  for (int row = 0; row < kRows; ++row) CHECK(mine[row] == item(rank, row, 0), "column scatter");
  absorb(mine, sizeof mine);

  for (int row = 0; row < kRows; ++row) mine[row] = item(rank, row, 1);
  for (int i = 0; i < kRows * size; ++i) matrix[i] = kUntouched;
  MPI_Gather(mine, kRows, MPI_INT, matrix, 1, column, size - 1, comm);
  if (rank == size - 1) {
    int good = 1;
    for (int row = 0; row < kRows; ++row) {
      for (int c = 0; c < size; ++c) good &= matrix[row * size + c] == item(c, row, 1);
    }
    CHECK(good, "column gather");
    absorb(matrix, sizeof(int) * kRows * size);
  }

  // Bcast with the non-contiguous column type on every rank, and a duplicate of it (a copy
  // of a committed type, committed without MPI_Type_commit).
  MPI_Datatype copy;
  MPI_Type_dup(column, &copy);
  for (int i = 0; i < kRows * size; ++i) matrix[i] = rank == 1 % size ? item(9, i, 2) : kUntouched;
  MPI_Bcast(matrix, 1, copy, 1 % size, comm);
  int good = 1;
  for (int i = 0; i < kRows * size; ++i) {
    const int in_column = i % size == 0;
    good &= matrix[i] == (in_column || rank == 1 % size ? item(9, i, 2) : kUntouched);
  }
  CHECK(good, "column bcast");
  absorb(matrix, sizeof(int) * kRows * size);
  MPI_Type_free(&copy);
  MPI_Type_free(&vector);
  MPI_Type_free(&column);
  free(matrix);
}

// Allgather into a 2 x 2p grid of ints: rank r's 2x2 block lands in columns 2r and 2r+1,
// through a subarray resized to two ints.
static void check_subarray(MPI_Comm comm, int rank, int size) {
  const int sizes[2] = {2, 2 * size}, subsizes[2] = {2, 2}, starts[2] = {0, 0};
  MPI_Datatype block, placed;
  MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &block);
  MPI_Type_create_resized(block, 0, 2 * sizeof(int), &placed);
  MPI_Type_commit(&placed);
  int mine[4], *grid = filled(4 * size, kUntouched);
  for (int i = 0; i < 4; ++i) mine[i] = item(rank, 0, i);
  MPI_Allgather(mine, 4, MPI_INT, grid, 1, placed, comm);
  int good = grid[4 * size] == kUntouched;
  for (int r = 0; r < size; ++r) {
    for (int row = 0; row < 2; ++row) {
      for (int c = 0; c < 2; ++c)
        good &= grid[row * 2 * size + 2 * r + c] == item(r, 0, 2 * row + c);
    }
  }
  CHECK(good, "subarray allgather");
  absorb(grid, sizeof(int) * 4 * size);
  MPI_Type_free(&block);
  MPI_Type_free(&placed);
  free(grid);
}

// Allgather of large blocks (80 KB, packed and unpacked by the layer on their way between nodes)
// through a strided type: every other int of rank r's stretch of 2 x kItems, the ints between
// untouched; sent as plain ints, in place, or sent strided and received plain.
static void check_strided_allgather(MPI_Comm comm, int rank, int size) {
  enum { kItems = 20000 };
  MPI_Datatype vector, strided;
  MPI_Type_vector(kItems, 1, 2, MPI_INT, &vector);
  MPI_Type_create_resized(vector, 0, 2 * kItems * sizeof(int), &strided);
  MPI_Type_commit(&strided);
  int* spread = filled(2 * kItems * size, kUntouched);
  int* plain = filled(kItems * size, kUntouched);
  for (int way = 0; way < 3; ++way) {
    for (int i = 0; i <= 2 * kItems * size; ++i) spread[i] = kUntouched;
    for (int i = 0; i <= kItems * size; ++i) plain[i] = kUntouched;
    for (int i = 0; i < kItems; ++i) {
      plain[i] = item(rank, way, i);
      if (way == 1) spread[2 * kItems * rank + 2 * i] = item(rank, way, i);
    }
    if (way == 0) MPI_Allgather(plain, kItems, MPI_INT, spread, 1, strided, comm);
    if (way == 1) MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, spread, 1, strided, comm);
    if (way == 2) {
      for (int i = 0; i < kItems; ++i) spread[2 * i] = item(rank, way, i);
      MPI_Allgather(spread, 1, strided, plain, kItems, MPI_INT, comm);
    }
    int good = 1;
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < kItems; ++i) {
        if (way == 2) {
          good &= plain[r * kItems + i] == item(r, way, i);
        } else {
          good &= spread[2 * kItems * r + 2 * i] == item(r, way, i) &&
                  spread[2 * kItems * r + 2 * i + 1] == kUntouched;
        }
      }
    }
    good &= way == 2 ? plain[kItems * size] == kUntouched : spread[2 * kItems * size] == kUntouched;
    CHECK(good, "strided allgather way %d", way);
    if (way == 2)
      absorb(plain, sizeof(int) * kItems * size);
    else
      absorb(spread, sizeof(int) * 2 * kItems * size);
  }
  MPI_Type_free(&vector);
  MPI_Type_free(&strided);
  free(spread);
  free(plain);
}

// Alltoall of a {char, double, short} struct type (with padding: only the fields are digested).
static void check_struct_type(MPI_Comm comm, int rank, int size) {
  struct Record {
    char tag;
    double value;
    short small;
  };
  const int lengths[3] = {1, 1, 1};
  const MPI_Aint offsets[3] = {offsetof(struct Record, tag), offsetof(struct Record, value),
                               offsetof(struct Record, small)};
  const MPI_Datatype fields[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT};
  MPI_Datatype record, sized;
  MPI_Type_create_struct(3, lengths, offsets, fields, &record);
  MPI_Type_create_resized(record, 0, sizeof(struct Record), &sized);
  MPI_Type_commit(&sized);
  struct Record* send = calloc(2 * size, sizeof(struct Record));
  struct Record* recv = calloc(2 * size, sizeof(struct Record));
  for (int i = 0; i < 2 * size; ++i) {
    send[i].tag = (char)('a' + rank);
    send[i].value = item(rank, i / 2, i % 2) * 0.25;
    send[i].small = (short)(rank * 10 + i);
  }
  MPI_Alltoall(send, 2, sized, recv, 2, sized, comm);
  int good = 1;
  for (int s = 0; s < size; ++s) {
    for (int k = 0; k < 2; ++k) {
      const struct Record* got = &recv[2 * s + k];
      good &= got->tag == (char)('a' + s) && got->value == item(s, rank, k) * 0.25 &&
              got->small == (short)(s * 10 + 2 * rank + k);
      absorb(&got->tag, 1);
      absorb(&got->value, sizeof got->value);
      absorb(&got->small, sizeof got->small);
    }
  }
  CHECK(good, "struct alltoall");
  MPI_Type_free(&record);
  MPI_Type_free(&sized);
  free(send);
  free(recv);
}

void check_movement(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int bases[] = {0, 3, 700, 40000};
  for (int b = 0; b < 4; ++b) {
    check_scatter_gather(comm, rank, size, bases[b]);
    check_scatterv_gatherv(comm, rank, size, bases[b]);
    check_allgathers(comm, rank, size, bases[b]);
    check_alltoalls(comm, rank, size, bases[b]);
    check_alltoallw(comm, rank, size, bases[b]);
  }
  check_column_types(comm, rank, size);
  check_subarray(comm, rank, size);
  check_strided_allgather(comm, rank, size);
  check_struct_type(comm, rank, size);
}
