// MPI-4's large-count forms (MPI_Count counts, MPI_Aint displacements) where the MPI has them
// (MPICH 4; Open MPI 4.1 says MPI 3.1): bcast, reduce, allreduce, reduce_scatter(_block), scan,
// exscan, reduce_local, scatter(v), gather(v), allgather(v) and alltoall(v/w) (blocking,
// nonblocking and persistent), small and large, each result checked against the inputs. The
// layer serves them as the int forms (the run's verbose table and SHMCOLL_TEST_NO_PMPI show it).
// Counts past INT_MAX are left out: 2 GiB buffers per rank do not fit this machine's memory.
#define _GNU_SOURCE  // dladdr
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

#if MPI_VERSION >= 4

static long long input(int rank, MPI_Count i) {
  return (long long)rank * 1000003 + i % 9973;
}

static void check_reductions_c(MPI_Comm comm, MPI_Count n) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  long long* mine = malloc(sizeof(long long) * (size_t)n);
  long long* sum = malloc(sizeof(long long) * (size_t)n);
  for (MPI_Count i = 0; i < n; ++i) mine[i] = input(rank, i);
  long long ranks_total = (long long)size * (size - 1) / 2;
  int bad = 0;

  MPI_Allreduce_c(mine, sum, n, MPI_LONG_LONG, MPI_SUM, comm);
  for (MPI_Count i = 0; i < n; ++i) bad += sum[i] != ranks_total * 1000003 + size * (i % 9973);
  MPI_Request request;
  MPI_Iallreduce_c(mine, sum, n, MPI_LONG_LONG, MPI_MAX, comm, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  for (MPI_Count i = 0; i < n; ++i) bad += sum[i] != input(size - 1, i);
  MPI_Allreduce_init_c(mine, sum, n, MPI_LONG_LONG, MPI_MIN, comm, MPI_INFO_NULL, &request);
  for (int round = 0; round < 2; ++round) {
    MPI_Start(&request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    for (MPI_Count i = 0; i < n; ++i) bad += sum[i] != input(0, i);
  }
  MPI_Request_free(&request);

  const int root = size - 1;
  for (MPI_Count i = 0; i < n; ++i) sum[i] = -1;
  MPI_Reduce_c(mine, sum, n, MPI_LONG_LONG, MPI_SUM, root, comm);
  if (rank == root)
    for (MPI_Count i = 0; i < n; ++i) bad += sum[i] != ranks_total * 1000003 + size * (i % 9973);
  MPI_Ireduce_c(mine, sum, n, MPI_LONG_LONG, MPI_MAX, 0, comm, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  if (rank == 0)
    for (MPI_Count i = 0; i < n; ++i) bad += sum[i] != input(size - 1, i);

  for (MPI_Count i = 0; i < n; ++i) sum[i] = rank == root ? input(root, i) : -1;
  MPI_Bcast_c(sum, n, MPI_LONG_LONG, root, comm);
  for (MPI_Count i = 0; i < n; ++i) bad += sum[i] != input(root, i);
  for (MPI_Count i = 0; i < n; ++i) sum[i] = rank == 0 ? input(0, i) : -1;
  MPI_Ibcast_c(sum, n, MPI_LONG_LONG, 0, comm, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  for (MPI_Count i = 0; i < n; ++i) bad += sum[i] != input(0, i);
  CHECK(bad == 0, "large-count reductions and bcasts of %lld elements: %d wrong", (long long)n,
        bad);
  absorb(sum, sizeof(long long) * (size_t)n);
  free(mine);
  free(sum);
}

// Completes the call just made in `form` (0 blocking, 1 nonblocking, 2 persistent, not yet
// started): starts it, waits for it and frees it as that form asks.
static void complete(int form, MPI_Request* request) {
  if (form == 2) MPI_Start(request);
  if (form > 0) MPI_Wait(request, MPI_STATUS_IGNORE);
  if (form == 2) MPI_Request_free(request);
}

// reduce_scatter (blocks of n - b % 2 elements), reduce_scatter_block, scan and exscan, each
// form; the persistent bcast and reduce; reduce_local. Rank r's element i is input(r, i).
static void check_prefix_and_scatter_reductions_c(MPI_Comm comm, MPI_Count n) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  long long* mine = malloc(sizeof(long long) * (size_t)(n * size));
  long long* out = malloc(sizeof(long long) * (size_t)(n * size));
  MPI_Count* counts = malloc(sizeof(MPI_Count) * size);
  for (MPI_Count i = 0; i < n * size; ++i) mine[i] = input(rank, i);
  MPI_Count offset = 0;  // of this rank's block in reduce_scatter
  for (int b = 0; b < size; ++b) {
    counts[b] = n - b % 2;
    if (b < rank) offset += counts[b];
  }
  const long long below = (long long)rank * (rank - 1) / 2;  // 0 + 1 + ... + rank - 1
  int bad = 0;
  MPI_Request request;
  for (int form = 0; form < 3; ++form) {  // blocking, nonblocking, persistent
    memset(out, 0, sizeof(long long) * (size_t)(n * size));
    if (form == 0) MPI_Reduce_scatter_c(mine, out, counts, MPI_LONG_LONG, MPI_SUM, comm);
    if (form == 1) MPI_Ireduce_scatter_c(mine, out, counts, MPI_LONG_LONG, MPI_SUM, comm, &request);
    if (form == 2)
      MPI_Reduce_scatter_init_c(mine, out, counts, MPI_LONG_LONG, MPI_SUM, comm, MPI_INFO_NULL,
                                &request);
    complete(form, &request);
    for (MPI_Count i = 0; i < counts[rank]; ++i)
      bad += out[i] != (long long)size * (size - 1) / 2 * 1000003 + size * ((offset + i) % 9973);

    memset(out, 0, sizeof(long long) * (size_t)(n * size));
    if (form == 0) MPI_Reduce_scatter_block_c(mine, out, n, MPI_LONG_LONG, MPI_MAX, comm);
    if (form == 1)
      MPI_Ireduce_scatter_block_c(mine, out, n, MPI_LONG_LONG, MPI_MAX, comm, &request);
    if (form == 2)
      MPI_Reduce_scatter_block_init_c(mine, out, n, MPI_LONG_LONG, MPI_MAX, comm, MPI_INFO_NULL,
                                      &request);
    complete(form, &request);
    for (MPI_Count i = 0; i < n; ++i) bad += out[i] != input(size - 1, rank * n + i);

    memset(out, 0, sizeof(long long) * (size_t)(n * size));
    if (form == 0) MPI_Scan_c(mine, out, n, MPI_LONG_LONG, MPI_SUM, comm);
    if (form == 1) MPI_Iscan_c(mine, out, n, MPI_LONG_LONG, MPI_SUM, comm, &request);
    if (form == 2)
      MPI_Scan_init_c(mine, out, n, MPI_LONG_LONG, MPI_SUM, comm, MPI_INFO_NULL, &request);
    complete(form, &request);
    for (MPI_Count i = 0; i < n; ++i)
      bad += out[i] != (below + rank) * 1000003 + (rank + 1) * (i % 9973);

    memset(out, 0, sizeof(long long) * (size_t)(n * size));
    if (form == 0) MPI_Exscan_c(mine, out, n, MPI_LONG_LONG, MPI_SUM, comm);
    if (form == 1) MPI_Iexscan_c(mine, out, n, MPI_LONG_LONG, MPI_SUM, comm, &request);
    if (form == 2)
      MPI_Exscan_init_c(mine, out, n, MPI_LONG_LONG, MPI_SUM, comm, MPI_INFO_NULL, &request);
    complete(form, &request);
    for (MPI_Count i = 0; i < n && rank > 0; ++i)  // rank 0's is undefined
      bad += out[i] != below * 1000003 + rank * (i % 9973);
  }

  for (MPI_Count i = 0; i < n; ++i) out[i] = rank == 0 ? input(0, i) : -1;
  MPI_Bcast_init_c(out, n, MPI_LONG_LONG, 0, comm, MPI_INFO_NULL, &request);
  complete(2, &request);
  for (MPI_Count i = 0; i < n; ++i) bad += out[i] != input(0, i);
  memset(out, 0, sizeof(long long) * (size_t)n);
  MPI_Reduce_init_c(mine, out, n, MPI_LONG_LONG, MPI_MIN, size - 1, comm, MPI_INFO_NULL, &request);
  complete(2, &request);
  for (MPI_Count i = 0; i < n && rank == size - 1; ++i) bad += out[i] != input(0, i);
  memcpy(out, mine, sizeof(long long) * (size_t)n);
  MPI_Reduce_local_c(mine, out, n, MPI_LONG_LONG, MPI_SUM);
  for (MPI_Count i = 0; i < n; ++i) bad += out[i] != 2 * input(rank, i);
  CHECK(bad == 0,
        "large-count reduce_scatter(_block), scan, exscan, persistent bcast and reduce, "
        "reduce_local of %lld elements: %d wrong",
        (long long)n, bad);
  absorb(out, sizeof(long long) * (size_t)n);
  free(mine), free(out), free(counts);
}

// Rank r sends (r + peer) % 3 + `base` ints to each peer, blocks laid out back to front, so
// counts and displacements both matter; by alltoallv, then by alltoallw (displacements in bytes,
// a type per peer).
static void check_alltoallv_and_w_c(MPI_Comm comm, MPI_Count base) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Count* send_counts = malloc(sizeof(MPI_Count) * size);
  MPI_Count* recv_counts = malloc(sizeof(MPI_Count) * size);
  MPI_Aint* send_displs = malloc(sizeof(MPI_Aint) * size);
  MPI_Aint* recv_displs = malloc(sizeof(MPI_Aint) * size);
  MPI_Count send_total = 0, recv_total = 0;
  for (int peer = size - 1; peer >= 0; --peer) {
    send_counts[peer] = (rank + peer) % 3 + base;
    send_displs[peer] = (MPI_Aint)send_total;
    send_total += send_counts[peer];
    recv_counts[peer] = (peer + rank) % 3 + base;
    recv_displs[peer] = (MPI_Aint)recv_total;
    recv_total += recv_counts[peer];
  }
  int* send = malloc(sizeof(int) * (size_t)send_total);
  int* recv = malloc(sizeof(int) * (size_t)recv_total);
  for (int peer = 0; peer < size; ++peer)
    for (MPI_Count i = 0; i < send_counts[peer]; ++i)
      send[send_displs[peer] + i] = rank * 100000 + peer * 1000 + (int)(i % 997);
  MPI_Aint* send_bytes = malloc(sizeof(MPI_Aint) * size);
  MPI_Aint* recv_bytes = malloc(sizeof(MPI_Aint) * size);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * size);
  for (int peer = 0; peer < size; ++peer) {
    send_bytes[peer] = send_displs[peer] * (MPI_Aint)sizeof(int);
    recv_bytes[peer] = recv_displs[peer] * (MPI_Aint)sizeof(int);
    types[peer] = MPI_INT;
  }
  int bad = 0;
  for (int form = 0; form < 6; ++form) {  // alltoallv, then alltoallw: blocking, nonblocking,
                                          // persistent
    MPI_Request request;
    memset(recv, 0, sizeof(int) * (size_t)recv_total);
    if (form == 3)
      MPI_Alltoallw_c(send, send_counts, send_bytes, types, recv, recv_counts, recv_bytes, types,
                      comm);
    if (form == 4)
      MPI_Ialltoallw_c(send, send_counts, send_bytes, types, recv, recv_counts, recv_bytes, types,
                       comm, &request);
    if (form == 5)
      MPI_Alltoallw_init_c(send, send_counts, send_bytes, types, recv, recv_counts, recv_bytes,
                           types, comm, MPI_INFO_NULL, &request);
    if (form == 0)
      MPI_Alltoallv_c(send, send_counts, send_displs, MPI_INT, recv, recv_counts, recv_displs,
                      MPI_INT, comm);
    if (form == 1)
      MPI_Ialltoallv_c(send, send_counts, send_displs, MPI_INT, recv, recv_counts, recv_displs,
                       MPI_INT, comm, &request);
    if (form == 2)
      MPI_Alltoallv_init_c(send, send_counts, send_displs, MPI_INT, recv, recv_counts, recv_displs,
                           MPI_INT, comm, MPI_INFO_NULL, &request);
    complete(form % 3, &request);
    for (int peer = 0; peer < size; ++peer)
      for (MPI_Count i = 0; i < recv_counts[peer]; ++i)
        bad += recv[recv_displs[peer] + i] != peer * 100000 + rank * 1000 + (int)(i % 997);
  }
  CHECK(bad == 0, "alltoallv_c and alltoallw_c with blocks of %lld+ ints: %d wrong",
        (long long)base, bad);
  absorb(recv, sizeof(int) * (size_t)recv_total);
  free(send), free(recv), free(send_counts), free(recv_counts), free(send_displs),
      free(recv_displs), free(send_bytes), free(recv_bytes), free(types);
}

// scatter, gather, allgather and alltoall of `n` ints per block, each form once: block b of rank
// r holds r * 100000 + b * 1000 + i % 997.
static int block_value(int from, int block, MPI_Count i) {
  return from * 100000 + block * 1000 + (int)(i % 997);
}

static int blocks_hold(const int* data, int blocks, MPI_Count n, int from_rank, int block_fixed) {
  int bad = 0;
  for (int b = 0; b < blocks; ++b)
    for (MPI_Count i = 0; i < n; ++i) {
      const int from = from_rank >= 0 ? from_rank : b, block = block_fixed >= 0 ? block_fixed : b;
      bad += data[b * n + i] != block_value(from, block, i);
    }
  return bad;
}

static void check_movement_c(MPI_Comm comm, MPI_Count n) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int* send = malloc(sizeof(int) * (size_t)(n * size));
  int* recv = malloc(sizeof(int) * (size_t)(n * size));
  for (int b = 0; b < size; ++b)
    for (MPI_Count i = 0; i < n; ++i) send[b * n + i] = block_value(rank, b, i);
  const int root = size - 1;
  int bad = 0;
  MPI_Request request;
  for (int form = 0; form < 3; ++form) {  // blocking, nonblocking, persistent
    memset(recv, 0, sizeof(int) * (size_t)(n * size));
    if (form == 0) MPI_Scatter_c(send, n, MPI_INT, recv, n, MPI_INT, root, comm);
    if (form == 1) MPI_Iscatter_c(send, n, MPI_INT, recv, n, MPI_INT, root, comm, &request);
    if (form == 2)
      MPI_Scatter_init_c(send, n, MPI_INT, recv, n, MPI_INT, root, comm, MPI_INFO_NULL, &request);
    complete(form, &request);
    bad += blocks_hold(recv, 1, n, root, rank);

    memset(recv, 0, sizeof(int) * (size_t)(n * size));
    if (form == 0) MPI_Gather_c(send, n, MPI_INT, recv, n, MPI_INT, root, comm);
    if (form == 1) MPI_Igather_c(send, n, MPI_INT, recv, n, MPI_INT, root, comm, &request);
    if (form == 2)
      MPI_Gather_init_c(send, n, MPI_INT, recv, n, MPI_INT, root, comm, MPI_INFO_NULL, &request);
    complete(form, &request);
    if (rank == root) bad += blocks_hold(recv, size, n, -1, 0);

    memset(recv, 0, sizeof(int) * (size_t)(n * size));
    if (form == 0) MPI_Allgather_c(send, n, MPI_INT, recv, n, MPI_INT, comm);
    if (form == 1) MPI_Iallgather_c(send, n, MPI_INT, recv, n, MPI_INT, comm, &request);
    if (form == 2)
      MPI_Allgather_init_c(send, n, MPI_INT, recv, n, MPI_INT, comm, MPI_INFO_NULL, &request);
    complete(form, &request);
    bad += blocks_hold(recv, size, n, -1, 0);

    memset(recv, 0, sizeof(int) * (size_t)(n * size));
    if (form == 0) MPI_Alltoall_c(send, n, MPI_INT, recv, n, MPI_INT, comm);
    if (form == 1) MPI_Ialltoall_c(send, n, MPI_INT, recv, n, MPI_INT, comm, &request);
    if (form == 2)
      MPI_Alltoall_init_c(send, n, MPI_INT, recv, n, MPI_INT, comm, MPI_INFO_NULL, &request);
    complete(form, &request);
    bad += blocks_hold(recv, size, n, -1, rank);
  }
  CHECK(bad == 0, "large-count scatter, gather, allgather and alltoall of %lld ints: %d wrong",
        (long long)n, bad);
  absorb(recv, sizeof(int) * (size_t)(n * size));
  free(send);
  free(recv);
}

// scatterv, gatherv and allgatherv (each form): block b holds (b % 3) + `base` ints, laid out back
// to front.
static void check_v_forms_c(MPI_Comm comm, MPI_Count base) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Count* counts = malloc(sizeof(MPI_Count) * size);
  MPI_Aint* displs = malloc(sizeof(MPI_Aint) * size);
  MPI_Count total = 0;
  for (int b = size - 1; b >= 0; --b) {
    counts[b] = b % 3 + base;
    displs[b] = (MPI_Aint)total;
    total += counts[b];
  }
  int* send = malloc(sizeof(int) * (size_t)total);
  int* recv = malloc(sizeof(int) * (size_t)total);
  for (int b = 0; b < size; ++b)
    for (MPI_Count i = 0; i < counts[b]; ++i) send[displs[b] + i] = block_value(rank, b, i);
  const int root = size - 1;
  const int* mine = send + displs[rank];  // gatherv and allgatherv: rank r gives its block r
  int bad = 0;
  MPI_Request request;
  for (int form = 0; form < 3; ++form) {  // blocking, nonblocking, persistent
    memset(recv, 0, sizeof(int) * (size_t)total);
    if (form == 0)
      MPI_Scatterv_c(send, counts, displs, MPI_INT, recv, counts[rank], MPI_INT, root, comm);
    if (form == 1)
      MPI_Iscatterv_c(send, counts, displs, MPI_INT, recv, counts[rank], MPI_INT, root, comm,
                      &request);
    if (form == 2)
      MPI_Scatterv_init_c(send, counts, displs, MPI_INT, recv, counts[rank], MPI_INT, root, comm,
                          MPI_INFO_NULL, &request);
    complete(form, &request);
    for (MPI_Count i = 0; i < counts[rank]; ++i) bad += recv[i] != block_value(root, rank, i);

    memset(recv, 0, sizeof(int) * (size_t)total);
    if (form == 0)
      MPI_Gatherv_c(mine, counts[rank], MPI_INT, recv, counts, displs, MPI_INT, root, comm);
    if (form == 1)
      MPI_Igatherv_c(mine, counts[rank], MPI_INT, recv, counts, displs, MPI_INT, root, comm,
                     &request);
    if (form == 2)
      MPI_Gatherv_init_c(mine, counts[rank], MPI_INT, recv, counts, displs, MPI_INT, root, comm,
                         MPI_INFO_NULL, &request);
    complete(form, &request);
    for (int b = 0; b < size && rank == root; ++b)
      for (MPI_Count i = 0; i < counts[b]; ++i) bad += recv[displs[b] + i] != block_value(b, b, i);

    memset(recv, 0, sizeof(int) * (size_t)total);
    if (form == 0)
      MPI_Allgatherv_c(mine, counts[rank], MPI_INT, recv, counts, displs, MPI_INT, comm);
    if (form == 1)
      MPI_Iallgatherv_c(mine, counts[rank], MPI_INT, recv, counts, displs, MPI_INT, comm, &request);
    if (form == 2)
      MPI_Allgatherv_init_c(mine, counts[rank], MPI_INT, recv, counts, displs, MPI_INT, comm,
                            MPI_INFO_NULL, &request);
    complete(form, &request);
    for (int b = 0; b < size; ++b)
      for (MPI_Count i = 0; i < counts[b]; ++i) bad += recv[displs[b] + i] != block_value(b, b, i);
  }
  CHECK(bad == 0, "large-count scatterv, gatherv, allgatherv with blocks of %lld+ ints: %d wrong",
        (long long)base, bad);
  absorb(recv, sizeof(int) * (size_t)total);
  free(send), free(recv), free(counts), free(displs);
}

// Where the layer is loaded, each large-count entry point the program calls is the layer's: a
// form it did not define would go straight to the MPI, unseen.
static void check_entry_points_are_the_layers(void) {
  if (!shmcoll_mpi_layer_version) return;
  const char* names[] = {"MPI_Bcast_c",
                         "MPI_Ibcast_c",
                         "MPI_Reduce_c",
                         "MPI_Ireduce_c",
                         "MPI_Allreduce_c",
                         "MPI_Iallreduce_c",
                         "MPI_Allreduce_init_c",
                         "MPI_Alltoallv_c",
                         "MPI_Scatter_c",
                         "MPI_Iscatter_c",
                         "MPI_Scatter_init_c",
                         "MPI_Gather_c",
                         "MPI_Igather_c",
                         "MPI_Gather_init_c",
                         "MPI_Allgather_c",
                         "MPI_Iallgather_c",
                         "MPI_Allgather_init_c",
                         "MPI_Alltoall_c",
                         "MPI_Ialltoall_c",
                         "MPI_Alltoall_init_c",
                         "MPI_Scatterv_c",
                         "MPI_Iscatterv_c",
                         "MPI_Scatterv_init_c",
                         "MPI_Gatherv_c",
                         "MPI_Igatherv_c",
                         "MPI_Gatherv_init_c",
                         "MPI_Allgatherv_c",
                         "MPI_Iallgatherv_c",
                         "MPI_Allgatherv_init_c",
                         "MPI_Ialltoallv_c",
                         "MPI_Alltoallv_init_c",
                         "MPI_Reduce_scatter_c",
                         "MPI_Ireduce_scatter_c",
                         "MPI_Reduce_scatter_init_c",
                         "MPI_Reduce_scatter_block_c",
                         "MPI_Ireduce_scatter_block_c",
                         "MPI_Reduce_scatter_block_init_c",
                         "MPI_Scan_c",
                         "MPI_Iscan_c",
                         "MPI_Scan_init_c",
                         "MPI_Exscan_c",
                         "MPI_Iexscan_c",
                         "MPI_Exscan_init_c",
                         "MPI_Bcast_init_c",
                         "MPI_Reduce_init_c",
                         "MPI_Reduce_local_c",
                         "MPI_Alltoallw_c",
                         "MPI_Ialltoallw_c",
                         "MPI_Alltoallw_init_c"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    Dl_info where;
    void* entry = dlsym(RTLD_DEFAULT, names[i]);
    CHECK(entry && dladdr(entry, &where) && where.dli_fname && strstr(where.dli_fname, "shmcoll"),
          "%s is not the layer's (%s)", names[i], entry && where.dli_fname ? where.dli_fname : "-");
  }
}

void check_large_count_forms(MPI_Comm comm) {
  check_entry_points_are_the_layers();
  check_reductions_c(comm, 7);
  check_reductions_c(comm, 300000);  // 2.4 MB: the large paths
  check_prefix_and_scatter_reductions_c(comm, 9);
  check_prefix_and_scatter_reductions_c(comm, 100000);  // 800 KB blocks
  check_alltoallv_and_w_c(comm, 1);
  check_alltoallv_and_w_c(comm, 70000);
  check_v_forms_c(comm, 1);
  check_v_forms_c(comm, 80000);
  check_movement_c(comm, 5);
  check_movement_c(comm, 90000);  // 360 KB blocks: the kernel's single copy
}

#else

void check_large_count_forms(MPI_Comm comm) {
  (void)comm;
}

#endif
