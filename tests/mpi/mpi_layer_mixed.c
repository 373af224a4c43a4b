// Mixed type maps: MPI requires only that the ranks' type signatures match, not their layouts.
// Here odd ranks send and receive every block as one element of a strided type (a column of n
// ints, every other int) while even ranks use n plain ints, in every data-movement collective;
// and, in allgather, each rank sends its block of a global array through its own darray type,
// of every distribution and order, and a root's 20 MiB darray goes to plain ints. Every result is
// checked against the inputs, and the ints between a column's items must stay untouched.
#include <stdlib.h>

#include "layer_check.h"

enum { kGap = -7 };

static int item(int from, int to, int i) {
  return from * 10000000 + to * 100000 + i;
}

// How one rank lays out a block of n ints: `count` elements of `type`, item i of block k at
// [k * block_ints + i * stride]; MPI_INT with stride 1, or a column resized to 2n ints.
typedef struct {
  MPI_Datatype type;
  int count, stride, block_ints;
} Kind;

static Kind kind_of(int rank, int n, MPI_Datatype column) {
  if (rank % 2 == 0) return (Kind){MPI_INT, n, 1, n};
  return (Kind){column, 1, 2, 2 * n};
}

static int* blocks(int n_blocks, const Kind* kind) {
  int* data = malloc(sizeof(int) * ((size_t)n_blocks * kind->block_ints + 1));
  for (int i = 0; i <= n_blocks * kind->block_ints; ++i) data[i] = kGap;
  return data;
}

static void fill(int* data, int block, int from, int to, int n, const Kind* kind) {
  for (int i = 0; i < n; ++i) data[block * kind->block_ints + i * kind->stride] = item(from, to, i);
}

// Whether block `block` holds from -> to in the kind's layout, with its gaps untouched.
static int holds(const int* data, int block, int from, int to, int n, const Kind* kind) {
  const int* at = data + block * kind->block_ints;
  for (int i = 0; i < kind->block_ints; ++i) {
    const int want =
        i % kind->stride == 0 && i / kind->stride < n ? item(from, to, i / kind->stride) : kGap;
    if (at[i] != want) return 0;
  }
  return 1;
}

static void check_rooted(MPI_Comm comm, int rank, int size, int n, MPI_Datatype column) {
  const Kind mine = kind_of(rank, n, column);
  int* counts = malloc(sizeof(int) * size);
  int* displs = malloc(sizeof(int) * size);
  for (int r = 0; r < size; ++r)
    counts[r] = mine.count, displs[r] = r * (mine.type == MPI_INT ? n : 1);
  for (int root = 0; root < size; ++root) {
    int* one = blocks(1, &mine);
    if (rank == root) fill(one, 0, root, -1, n, &mine);
    MPI_Bcast(one, mine.count, mine.type, root, comm);
    CHECK(holds(one, 0, root, -1, n, &mine), "mixed bcast from %d on rank %d", root, rank);
    absorb(one, sizeof(int) * mine.block_ints);

    int* all = blocks(size, &mine);
    for (int d = 0; d < size && rank == root; ++d) fill(all, d, root, d, n, &mine);
    for (int v = 0; v < 2; ++v) {
      int* got = blocks(1, &mine);
      if (v) {
        MPI_Scatterv(all, counts, displs, mine.type, got, mine.count, mine.type, root, comm);
      } else {
        MPI_Scatter(all, mine.count, mine.type, got, mine.count, mine.type, root, comm);
      }
      CHECK(holds(got, 0, root, rank, n, &mine), "mixed scatter%s from %d on rank %d", v ? "v" : "",
            root, rank);
      absorb(got, sizeof(int) * mine.block_ints);
      free(got);

      int* gathered = blocks(size, &mine);
      int* own = blocks(1, &mine);
      fill(own, 0, rank, root, n, &mine);
      if (v) {
        MPI_Gatherv(own, mine.count, mine.type, gathered, counts, displs, mine.type, root, comm);
      } else {
        MPI_Gather(own, mine.count, mine.type, gathered, mine.count, mine.type, root, comm);
      }
      for (int r = 0; r < size && rank == root; ++r) {
        CHECK(holds(gathered, r, r, root, n, &mine), "mixed gather%s at %d from %d", v ? "v" : "",
              root, r);
      }
      if (rank == root) absorb(gathered, sizeof(int) * size * mine.block_ints);
      free(gathered);
      free(own);
    }
    free(all);
    free(one);
  }
  free(counts);
  free(displs);
}

// Debian's MPICH 4.0.2 hangs or fails in MPI_Allgatherv when ranks' type maps differ and blocks
// are large (278 KB here; found by this program). Where MPICH runs that call itself (without the
// layer, or on pretend nodes, where the layer passes allgatherv to PMPI) that form is left out;
// with the layer it is checked but kept out of the digest, which the other run cannot match.
static int mpich_hangs(int form, int n) {
#ifdef MPICH_VERSION
  return form == 1 && n > 1000;
#else
  (void)form, (void)n;
  return 0;
#endif
}

static void check_all_to_all(MPI_Comm comm, int rank, int size, int n, MPI_Datatype column) {
  const Kind mine = kind_of(rank, n, column);
  int* counts = malloc(sizeof(int) * size);
  int* displs = malloc(sizeof(int) * size);
  int* byte_displs = malloc(sizeof(int) * size);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * size);
  for (int r = 0; r < size; ++r) {
    counts[r] = mine.count;
    displs[r] = r * (mine.type == MPI_INT ? n : 1);
    byte_displs[r] = r * mine.block_ints * (int)sizeof(int);
    types[r] = mine.type;
  }
  for (int form = 0; form < 5; ++form) {  // allgather(v), alltoall(v/w)
    const int peer_bug = mpich_hangs(form, n);
    if (peer_bug && !layer_serves_every_call(comm)) continue;
    int* send = blocks(size, &mine);
    int* recv = blocks(size, &mine);
    const int all_gather = form < 2;
    for (int d = 0; d < size; ++d) fill(send, d, rank, all_gather ? -1 : d, n, &mine);
    switch (form) {
      case 0:
        MPI_Allgather(send, mine.count, mine.type, recv, mine.count, mine.type, comm);
        break;
      case 1:
        MPI_Allgatherv(send, mine.count, mine.type, recv, counts, displs, mine.type, comm);
        break;
      case 2:
        MPI_Alltoall(send, mine.count, mine.type, recv, mine.count, mine.type, comm);
        break;
      case 3:
        MPI_Alltoallv(send, counts, displs, mine.type, recv, counts, displs, mine.type, comm);
        break;
      default:
        MPI_Alltoallw(send, counts, byte_displs, types, recv, counts, byte_displs, types, comm);
        break;
    }
    for (int r = 0; r < size; ++r) {
      CHECK(holds(recv, r, r, all_gather ? -1 : rank, n, &mine), "mixed form %d: block %d on %d",
            form, r, rank);
    }
    if (!peer_bug) absorb(recv, sizeof(int) * size * mine.block_ints);
    free(send);
    free(recv);
  }
  free(counts);
  free(displs);
  free(byte_displs);
  free(types);
}

// Each rank sends its part of a block-distributed global array through its own darray type.
static void check_darray(MPI_Comm comm, int rank, int size, int n) {
  MPI_Datatype part;
  const int global = n * size, distrib = MPI_DISTRIBUTE_BLOCK, darg = MPI_DISTRIBUTE_DFLT_DARG;
  MPI_Type_create_darray(size, rank, 1, &global, &distrib, &darg, &size, MPI_ORDER_C, MPI_INT,
                         &part);
  MPI_Type_commit(&part);
  int* array = malloc(sizeof(int) * global);
  for (int i = 0; i < global; ++i) array[i] = i / n == rank ? item(rank, -1, i % n) : kGap;
  int* all = malloc(sizeof(int) * global);
  MPI_Allgather(array, 1, part, all, n, MPI_INT, comm);
  for (int i = 0; i < global; ++i)
    CHECK(all[i] == item(i / n, -1, i % n), "darray allgather %d", i);
  absorb(all, sizeof(int) * global);
  free(array);
  free(all);
  MPI_Type_free(&part);
}

// Distributed arrays of every kind (block, cyclic, cut blocks, undistributed dimensions, C and
// Fortran order, 1-3 dimensions): every rank's part of a global array whose
// items hold their own index, sent through that rank's darray type, gathered and broadcast.
// Every item must be one the
// sender owns (its block in each dimension dealt to the sender's grid coordinate), in the count
// the MPI says; the digest compares the order with the MPI's own.
typedef struct {
  int dims, order;
  int gsizes[3], distribs[3], dargs[3];
} Shape;

static int owns(const Shape* s, const int* psizes, int rank, long index) {
  int coordinate[3];
  for (int d = s->dims - 1, rest = rank; d >= 0; --d) {
    coordinate[d] = rest % psizes[d];
    rest /= psizes[d];
  }
  for (int step = 0; step < s->dims; ++step) {  // the fastest varying dimension first
    const int d = s->order == MPI_ORDER_C ? s->dims - 1 - step : step;
    const long at = index % s->gsizes[d];
    index /= s->gsizes[d];
    long block = s->dargs[d];
    if (s->distribs[d] == MPI_DISTRIBUTE_NONE) {
      block = s->gsizes[d];
    } else if (block == MPI_DISTRIBUTE_DFLT_DARG) {
      block =
          s->distribs[d] == MPI_DISTRIBUTE_BLOCK ? (s->gsizes[d] + psizes[d] - 1) / psizes[d] : 1;
    }
    if ((at / block) % psizes[d] != coordinate[d]) return 0;
  }
  return 1;
}

static void check_darray_shapes(MPI_Comm comm, int rank, int size) {
  const int B = MPI_DISTRIBUTE_BLOCK, C = MPI_DISTRIBUTE_CYCLIC, N = MPI_DISTRIBUTE_NONE,
            D = MPI_DISTRIBUTE_DFLT_DARG;
  const Shape shapes[] = {
      {1, MPI_ORDER_C, {103}, {C}, {D}},
      {1, MPI_ORDER_C, {103}, {C}, {4}},
      {1, MPI_ORDER_FORTRAN, {50}, {B}, {D}},
      {2, MPI_ORDER_C, {7, 9}, {B, C}, {D, 2}},
      {2, MPI_ORDER_FORTRAN, {13, 9}, {C, B}, {3, D}},
      {2, MPI_ORDER_C, {6, 11}, {N, C}, {D, 3}},
      {3, MPI_ORDER_FORTRAN, {4, 5, 6}, {C, N, B}, {1, D, D}},
      {3, MPI_ORDER_C, {8, 4, 7}, {B, C, C}, {D, 2, 1}},
  };
  // Every rank owns items at 1-4 ranks. (Open MPI 4.1 alone hangs in an allgatherv of an empty
  // part and truncates one of unequal darray parts: the parts are gathered, then broadcast.)
  for (size_t which = 0; which < sizeof shapes / sizeof shapes[0]; ++which) {
    const Shape* s = &shapes[which];
    // The processes on the first distributed dimension, 1 on the others.
    int psizes[3] = {1, 1, 1}, placed = 0;
    for (int d = 0; d < s->dims; ++d) {
      if (!placed && s->distribs[d] != N) psizes[d] = size, placed = 1;
    }
    if (!placed) continue;
    long items = 1;
    for (int d = 0; d < s->dims; ++d) items *= s->gsizes[d];
    MPI_Datatype part;
    MPI_Type_create_darray(size, rank, s->dims, s->gsizes, s->distribs, s->dargs, psizes, s->order,
                           MPI_INT, &part);
    MPI_Type_commit(&part);
    int part_bytes = 0;
    MPI_Type_size(part, &part_bytes);
    int* array = malloc(sizeof(int) * (size_t)items);
    for (long i = 0; i < items; ++i) array[i] = (int)i;
    int* counts = malloc(sizeof(int) * size);
    int* displs = malloc(sizeof(int) * size);
    const int mine = part_bytes / (int)sizeof(int);
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, comm);
    int total = 0;
    for (int r = 0; r < size; ++r) displs[r] = total, total += counts[r];
    int* all = malloc(sizeof(int) * (size_t)(total + 1));
    MPI_Gatherv(array, 1, part, all, counts, displs, MPI_INT, 0, comm);
    MPI_Bcast(all, total, MPI_INT, 0, comm);
    CHECK(total == items, "darray shape %zu: the parts cover the array", which);
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < counts[r]; ++i) {
        CHECK(owns(s, psizes, r, all[displs[r] + i]), "darray shape %zu: item of rank %d", which,
              r);
      }
    }
    absorb(all, sizeof(int) * (size_t)total);
    free(all);
    free(displs);
    free(counts);
    free(array);
    MPI_Type_free(&part);
  }
}

// A darray spanning more than the layer could probe (20 MiB) on the root, plain ints on the
// others: both describable, so every rank takes the same path (it hung when only the root went
// to the MPI).
static void check_large_darray_against_plain_ints(MPI_Comm comm, int rank, int size) {
  const int global = 5 << 20, distrib = MPI_DISTRIBUTE_CYCLIC, darg = 1000, root = size - 1;
  MPI_Datatype part;
  MPI_Type_create_darray(size, root, 1, &global, &distrib, &darg, &size, MPI_ORDER_C, MPI_INT,
                         &part);
  MPI_Type_commit(&part);
  int part_bytes = 0;
  MPI_Type_size(part, &part_bytes);
  const int n = part_bytes / (int)sizeof(int);
  int* data = malloc(sizeof(int) * (size_t)(rank == root ? global : n));
  if (rank == root) {
    for (int i = 0; i < global; ++i) data[i] = i;
    MPI_Bcast(data, 1, part, root, comm);
  } else {
    MPI_Bcast(data, n, MPI_INT, root, comm);
    int good = 1;
    for (int i = 0; i < n; ++i) {
      const int at = (i / darg * size + root) * darg + i % darg;  // the root's i-th item
      good &= data[i] == at;
    }
    CHECK(good, "a 20 MiB darray bcast into plain ints");
    absorb(data, sizeof(int) * (size_t)n);
  }
  free(data);
  MPI_Type_free(&part);
}

void check_mixed_type_maps(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int n = 5; n <= 70000; n *= 118) {  // a message line's worth, and several slots' worth
    MPI_Datatype vector, column;
    MPI_Type_vector(n, 1, 2, MPI_INT, &vector);
    MPI_Type_create_resized(vector, 0, (MPI_Aint)(2 * n * sizeof(int)), &column);
    MPI_Type_commit(&column);
    check_rooted(comm, rank, size, n, column);
    check_all_to_all(comm, rank, size, n, column);
    check_darray(comm, rank, size, n);
    MPI_Type_free(&column);
    MPI_Type_free(&vector);
  }
  check_darray_shapes(comm, rank, size);
  check_large_darray_against_plain_ints(comm, rank, size);
}
