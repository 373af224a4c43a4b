/* The same measurement as shmcoll-bench, for an MPI's own collectives, so the two tables compare:
 * per size a warm-up, then SAMPLES batches of back-to-back calls (about 200 us each) between
 * barriers; a sample is the slowest rank's time per call (MPI_MAX); the median is printed.
 * Usage: mpi_coll_bench COLL SIZES [SAMPLES]   COLL: allreduce|reduce|bcast|barrier, f32 sum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void call(const char* coll, float* send, float* recv, int count) {
  if (!strcmp(coll, "allreduce"))
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (!strcmp(coll, "reduce"))
    MPI_Reduce(send, recv, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
  else if (!strcmp(coll, "bcast"))
    MPI_Bcast(recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  else
    MPI_Barrier(MPI_COMM_WORLD);
}

static size_t parse_size(const char* text) {
  char* end;
  size_t value = strtoull(text, &end, 10);
  if (*end == 'K' || *end == 'k') value <<= 10;
  if (*end == 'M' || *end == 'm') value <<= 20;
  return value;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: mpi_coll_bench COLL SIZES [SAMPLES]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char* coll = argv[1];
  const int samples = argc > 3 ? atoi(argv[3]) : 30;
  char* sizes = strdup(argv[2]);
  double* times = malloc(sizeof(double) * samples);
  if (rank == 0) printf("%10s %12s %10s %10s\n", "bytes", "median_us", "min_us", "max_us");
  for (char* token = strtok(sizes, ","); token; token = strtok(NULL, ",")) {
    const size_t bytes = parse_size(token);
    const int count = (int)(bytes / sizeof(float));
    float* send = malloc(bytes + 64);
    float* recv = malloc(bytes + 64);
    for (int i = 0; i < count; ++i) send[i] = recv[i] = (float)(i % 7);
    double start = MPI_Wtime();
    for (int i = 0; i < 5; ++i) call(coll, send, recv, count);
    double per_call = (MPI_Wtime() - start) / 5;
    long batch = (long)(200e-6 / (per_call > 1e-9 ? per_call : 1e-9));
    if (batch < 1) batch = 1;
    if (batch > 10000) batch = 10000;
    MPI_Bcast(&batch, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    for (int s = 0; s < samples; ++s) {
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
      for (long i = 0; i < batch; ++i) call(coll, send, recv, count);
      double mine = (MPI_Wtime() - start) / batch, slowest;
      MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      times[s] = slowest;
    }
    if (rank == 0) {
      qsort(times, samples, sizeof(double), compare_doubles);
      printf("%10zu %12.3f %10.3f %10.3f\n", bytes, times[samples / 2] * 1e6, times[0] * 1e6,
             times[samples - 1] * 1e6);
    }
    free(send);
    free(recv);
    if (!strcmp(coll, "barrier")) break;
  }
  free(times);
  free(sizes);
  MPI_Finalize();
  return 0;
}
