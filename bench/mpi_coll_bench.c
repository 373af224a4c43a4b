/* The same measurement as shmcoll-bench, for an MPI's own collectives (or an MPI with shmcoll's
 * layer preloaded), so the contenders compare: per size a warm-up, one untimed batch, then SAMPLES
 * batches of back-to-back calls (about 200 us each) between barriers; a sample is the slowest
 * rank's time per call (MPI_MAX over every rank's own times, taken after the last sample). Rank 0
 * prints the median, min and max, then a line
 * "# samples BYTES t1 ... tN" (us, in order) that shmcoll-bench --vs reads.
 * With --single, a sample is one call after a barrier instead, on buffers fresh from calloc
 * (harness_method.h). With --written, the single-call method's buffers are
 * written once before timing, as OSU's set_buffer does: send pages then hold the program's data,
 * not the kernel's zero page (which favours a kernel copy: it reads one cached page). With
 * --alloc-mem, buffers come from MPI_Alloc_mem and are written before timing, in both methods.
 * Usage: mpi_coll_bench COLL SIZES [SAMPLES] [--vary-data] [--single] [--written] [--char]
 * [--alloc-mem],
 * f32 (--char: MPI_CHAR, OSU's default type) and sum. COLL is any collective shmcoll-bench knows;
 * SIZES follow its convention (OSU's): the vector for reductions, including reduce_scatter, and the
 * block per rank pair for scatter, gather, allgather and alltoall and their v/w forms; also
 * iallreduce and ibcast (MPI_Iallreduce or MPI_Ibcast, then MPI_Wait). --thread-multiple: MPI
 * initialised at MPI_THREAD_MULTIPLE (where the layer serves nonblocking calls across nodes).
 * --vary-data and the batch sizing: bench/harness_method.h. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_method.h"

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Per-rank counts and displacements for the v and w forms: every block the same. */
static int *counts, *displs, *byte_displs, *block_counts;
static MPI_Datatype* types;
static MPI_Datatype element = MPI_FLOAT;
static int element_bytes = sizeof(float);

static void set_layout(int size, int count) {
  for (int i = 0; i < size; ++i) {
    counts[i] = count;
    displs[i] = i * count;
    byte_displs[i] = i * count * element_bytes;
    block_counts[i] = count / size;
    types[i] = element;
  }
}

/* Resolved once, so every call costs the harness a switch, not a chain of string compares. */
enum Coll {
  ALLREDUCE,
  REDUCE,
  BCAST,
  REDUCE_SCATTER,
  REDUCE_SCATTER_BLOCK,
  SCAN,
  EXSCAN,
  SCATTER,
  SCATTERV,
  GATHER,
  GATHERV,
  ALLGATHER,
  ALLGATHERV,
  ALLTOALL,
  ALLTOALLV,
  ALLTOALLW,
  IALLREDUCE, /* MPI_Iallreduce then MPI_Wait: the nonblocking path's cost */
  IBCAST,
  BARRIER
};
static const char* const coll_names[] = {
    "allreduce", "reduce",     "bcast",      "reduce_scatter", "reduce_scatter_block",
    "scan",      "exscan",     "scatter",    "scatterv",       "gather",
    "gatherv",   "allgather",  "allgatherv", "alltoall",       "alltoallv",
    "alltoallw", "iallreduce", "ibcast",     "barrier"};

static enum Coll coll_of(const char* name) {
  for (int c = ALLREDUCE; c < BARRIER; ++c) {
    if (!strcmp(name, coll_names[c])) return (enum Coll)c;
  }
  return BARRIER;
}

static void call(enum Coll coll, void* send, void* recv, int count, int size) {
  MPI_Comm world = MPI_COMM_WORLD;
  switch (coll) {
    case ALLREDUCE:
      MPI_Allreduce(send, recv, count, element, MPI_SUM, world);
      break;
    case REDUCE:
      MPI_Reduce(send, recv, count, element, MPI_SUM, 0, world);
      break;
    case BCAST:
      MPI_Bcast(recv, count, element, 0, world);
      break;
    case REDUCE_SCATTER:
      MPI_Reduce_scatter(send, recv, block_counts, element, MPI_SUM, world);
      break;
    case REDUCE_SCATTER_BLOCK:
      MPI_Reduce_scatter_block(send, recv, count / size, element, MPI_SUM, world);
      break;
    case SCAN:
      MPI_Scan(send, recv, count, element, MPI_SUM, world);
      break;
    case EXSCAN:
      MPI_Exscan(send, recv, count, element, MPI_SUM, world);
      break;
    case SCATTER:
      MPI_Scatter(send, count, element, recv, count, element, 0, world);
      break;
    case SCATTERV:
      MPI_Scatterv(send, counts, displs, element, recv, count, element, 0, world);
      break;
    case GATHER:
      MPI_Gather(send, count, element, recv, count, element, 0, world);
      break;
    case GATHERV:
      MPI_Gatherv(send, count, element, recv, counts, displs, element, 0, world);
      break;
    case ALLGATHER:
      MPI_Allgather(send, count, element, recv, count, element, world);
      break;
    case ALLGATHERV:
      MPI_Allgatherv(send, count, element, recv, counts, displs, element, world);
      break;
    case ALLTOALL:
      MPI_Alltoall(send, count, element, recv, count, element, world);
      break;
    case ALLTOALLV:
      MPI_Alltoallv(send, counts, displs, element, recv, counts, displs, element, world);
      break;
    case ALLTOALLW:
      MPI_Alltoallw(send, counts, byte_displs, types, recv, counts, byte_displs, types, world);
      break;
    case IALLREDUCE: {
      MPI_Request request;
      MPI_Iallreduce(send, recv, count, element, MPI_SUM, world, &request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      break;
    }
    case IBCAST: {
      MPI_Request request;
      MPI_Ibcast(recv, count, element, 0, world, &request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      break;
    }
    case BARRIER:
      MPI_Barrier(world);
      break;
  }
}

static size_t parse_size(const char* text) {
  char* end;
  size_t value = strtoull(text, &end, 10);
  if (*end == 'K' || *end == 'k') value <<= 10;
  if (*end == 'M' || *end == 'm') value <<= 20;
  return value;
}

int main(int argc, char** argv) {
  int thread_multiple = 0;
  for (int a = 4; a < argc; ++a) thread_multiple |= !strcmp(argv[a], "--thread-multiple");
  if (thread_multiple) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int vary = 0, single = 0, written = 0, alloc_mem = 0, unknown = 0;
  for (int a = 4; a < argc; ++a) {
    if (!strcmp(argv[a], "--vary-data"))
      vary = 1;
    else if (!strcmp(argv[a], "--single"))
      single = 1;
    else if (!strcmp(argv[a], "--written"))
      written = 1;
    else if (!strcmp(argv[a], "--alloc-mem"))
      alloc_mem = 1;
    else if (!strcmp(argv[a], "--char"))
      element = MPI_CHAR, element_bytes = 1;
    else if (strcmp(argv[a], "--thread-multiple"))
      unknown = 1;
  }
  const int samples = argc > 3 ? atoi(argv[3]) : 30;
  if (argc < 3 || samples < 1 || unknown) {
    if (rank == 0) {
      fprintf(stderr,
              "usage: mpi_coll_bench COLL SIZES [SAMPLES] [--vary-data] [--single] [--written] "
              "[--char] [--alloc-mem] [--thread-multiple]\n");
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const enum Coll coll = coll_of(argv[1]);
  char* sizes = strdup(argv[2]);
  double* times = malloc(sizeof(double) * samples);
  counts = malloc(sizeof(int) * size);
  displs = malloc(sizeof(int) * size);
  byte_displs = malloc(sizeof(int) * size);
  block_counts = malloc(sizeof(int) * size);
  types = malloc(sizeof(MPI_Datatype) * size);
  if (rank == 0) printf("%10s %12s %10s %10s\n", "bytes", "median_us", "min_us", "max_us");
  for (char* token = strtok(sizes, ","); token; token = strtok(NULL, ",")) {
    const size_t bytes = coll != BARRIER ? parse_size(token) : 0;
    const int count = (int)(bytes / element_bytes);
    /* Room for a block per rank, in each of `slots` page-aligned slots; the batch method touches
     * every byte before timing, each slot with different values, the single-call method none
     * unless --written. */
    const size_t buffer_bytes = bytes * size, stride = vary_slot_stride(buffer_bytes);
    const size_t slots = vary ? vary_slot_count(stride) : 1;
    char *send, *recv;
    if (alloc_mem) {
      MPI_Alloc_mem((MPI_Aint)(stride * slots + 1), MPI_INFO_NULL, &send);
      MPI_Alloc_mem((MPI_Aint)(stride * slots + 1), MPI_INFO_NULL, &recv);
    } else {
      send =
          single ? calloc(stride * slots + 1, 1) : aligned_alloc(VARY_PAGE_BYTES, stride * slots);
      recv =
          single ? calloc(stride * slots + 1, 1) : aligned_alloc(VARY_PAGE_BYTES, stride * slots);
    }
    for (size_t slot = 0; slot < slots && (!single || written || alloc_mem); ++slot) {
      char* s = send + slot * stride;
      for (long i = 0; i < (long)count * size; ++i) {
        if (element_bytes == 1)
          s[i] = (char)((i + slot + rank) % 7);
        else
          ((float*)s)[i] = (float)((i + slot + rank) % 7);
      }
      /* The receive buffer holds the rank's data too, as shmcoll-bench's does: it is what a
       * bcast's root sends. Zeros there would make every slot, and every chunk of a long
       * message, hold the same bytes, which a layer that skips rewriting what its slot already
       * holds would send without writing (1 MiB bcast, 8 ranks: 82 us against 195 on data). */
      memcpy(recv + slot * stride, s, buffer_bytes);
    }
    set_layout(size, count);
    size_t next = 0; /* the slot the next call uses */
#define CALL()                                                           \
  do {                                                                   \
    call(coll, send + next * stride, recv + next * stride, count, size); \
    next = next + 1 == slots ? 0 : next + 1;                             \
  } while (0)
    for (int i = 0; i < WARMUP_CALLS; ++i) CALL();
    if (single) {
      for (int s = 0; s < samples; ++s) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        CALL();
        times[s] = MPI_Wtime() - start;
      }
    } else {
      double start = MPI_Wtime();
      for (int i = 0; i < SIZING_CALLS; ++i) CALL();
      double per_call = (MPI_Wtime() - start) / SIZING_CALLS;
      long batch = (long)(BATCH_SECONDS / (per_call > 1e-9 ? per_call : 1e-9));
      if (batch < 1) batch = 1;
      if (batch > MAX_BATCH_CALLS) batch = MAX_BATCH_CALLS;
      MPI_Bcast(&batch, 1, MPI_LONG, 0, MPI_COMM_WORLD);
      for (long i = 0; i < batch; ++i) CALL();
      for (int s = 0; s < samples; ++s) {
        MPI_Barrier(MPI_COMM_WORLD);
        start = MPI_Wtime();
        for (long i = 0; i < batch; ++i) CALL();
        times[s] = (MPI_Wtime() - start) / batch;
      }
    }
    /* Each sample's slowest rank, found once all samples are taken: a reduce after every call
     * would run between the call and the next barrier, where OSU and IMB have only the barrier,
     * and change who leaves that barrier first (a reduce's root leaves it last). */
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : times, rank == 0 ? times : NULL, samples, MPI_DOUBLE,
               MPI_MAX, 0, MPI_COMM_WORLD);
#undef CALL
    if (rank == 0) {
      printf("# samples %zu", bytes);
      for (int s = 0; s < samples; ++s) printf(" %.4f", times[s] * 1e6);
      printf("\n");
      qsort(times, samples, sizeof(double), compare_doubles);
      printf("%10zu %12.3f %10.3f %10.3f\n", bytes, times[samples / 2] * 1e6, times[0] * 1e6,
             times[samples - 1] * 1e6);
    }
    if (alloc_mem) {
      MPI_Free_mem(send);
      MPI_Free_mem(recv);
    } else {
      free(send);
      free(recv);
    }
    if (coll == BARRIER) break;
  }
  free(times);
  free(counts);
  free(displs);
  free(byte_displs);
  free(block_counts);
  free(types);
  free(sizes);
  MPI_Finalize();
  return 0;
}
