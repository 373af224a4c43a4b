// Mixed type maps: MPI requires only that the ranks' type signatures match, not their layouts.
// Here odd ranks send and receive every block as one element of a strided type (a column of n
// ints, every other int) while even ranks use n plain ints, in every data-movement collective;
// and, in allgather, each rank sends its block of a global array through its own darray type,
// which the layer can only describe by probing MPI's packing. Every result is checked against
// the inputs, and the ints between a column's items must stay untouched.
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
}
