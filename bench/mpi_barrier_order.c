/* The order in which ranks enter and leave a barrier, on one clock: what the one-call method
 * (a barrier, then one timed call, then the slowest rank's time) charges to a timed barrier where
 * ranks share CPUs. Per sample, as mpi_coll_bench --single times a barrier: MPI_Barrier, then
 * each rank reads CLOCK_MONOTONIC (one clock for every process of the node), makes the timed
 * MPI_Barrier and reads it again, then (unless --no-reduce) MPI_Reduce of its time to rank 0.
 *   mpi_barrier_order SAMPLES [--no-reduce]
 * Rank 0 prints the median over samples of: the slowest rank's time; the k-th entry and the
 * k-th exit, in us after the first entry; how often the rank that entered first was the slowest;
 * and how many samples had a rank leave before the last one entered (a broken barrier: must be
 * 0). A barrier whose first to enter also leaves first keeps the slowest time near the spread of
 * the entries; one whose first to enter leaves last adds the spread of the exits to it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Rank r's entry (which = 0) or exit (1) time in one sample: `of` is the sample's first pair,
 * and each rank's pairs follow one another, 2 * samples times apart. */
static double time_of(const double* of, int samples, int r, int which) {
  return of[2 * (size_t)samples * (size_t)r + (size_t)which];
}

/* The k-th earliest of one sample's entries or exits, each after `origin`, into column k of
 * `ranked` ([k][sample]). */
static void rank_times(const double* of, int samples, int size, int which, double origin,
                       double* scratch, double* ranked, int sample) {
  for (int r = 0; r < size; ++r) scratch[r] = time_of(of, samples, r, which) - origin;
  qsort(scratch, (size_t)size, sizeof *scratch, by_value);
  for (int k = 0; k < size; ++k) ranked[(size_t)k * samples + sample] = scratch[k];
}

static double median(double* values, int n) {
  qsort(values, (size_t)n, sizeof *values, by_value);
  return values[n / 2];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int samples = argc > 1 ? atoi(argv[1]) : 0;
  const int reduce = !(argc > 2 && strcmp(argv[2], "--no-reduce") == 0);
  if (samples <= 0) {
    if (rank == 0) fprintf(stderr, "usage: mpi_barrier_order SAMPLES [--no-reduce]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  /* Per sample: my entry and exit times. */
  double* mine = malloc(sizeof(double) * 2 * (size_t)samples);
  double* all = rank == 0 ? malloc(sizeof(double) * 2 * (size_t)samples * (size_t)size) : NULL;
  for (int i = 0; i < 5; ++i) MPI_Barrier(MPI_COMM_WORLD);
  for (int s = 0; s < samples; ++s) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double entry = now_us();
    MPI_Barrier(MPI_COMM_WORLD);
    const double exit = now_us(), time = exit - entry;
    double slowest;
    if (reduce) MPI_Reduce(&time, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    mine[2 * s] = entry;
    mine[2 * s + 1] = exit;
  }
  MPI_Gather(mine, 2 * samples, MPI_DOUBLE, all, 2 * samples, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double* slowest = malloc(sizeof(double) * (size_t)samples);
    double* entries = malloc(sizeof(double) * (size_t)samples * (size_t)size); /* [k][sample] */
    double* exits = malloc(sizeof(double) * (size_t)samples * (size_t)size);
    double* sorted = malloc(sizeof(double) * (size_t)size);
    int first_in_slowest = 0, broken = 0;
    for (int s = 0; s < samples; ++s) {
      const double* of = all + 2 * s;
#define ENTRY(r) time_of(of, samples, r, 0)
#define EXIT(r) time_of(of, samples, r, 1)
      int first = 0, slow = 0;
      double last_entry = ENTRY(0), first_exit = EXIT(0);
      for (int r = 1; r < size; ++r) {
        if (ENTRY(r) < ENTRY(first)) first = r;
        if (EXIT(r) - ENTRY(r) > EXIT(slow) - ENTRY(slow)) slow = r;
        if (ENTRY(r) > last_entry) last_entry = ENTRY(r);
        if (EXIT(r) < first_exit) first_exit = EXIT(r);
      }
      slowest[s] = EXIT(slow) - ENTRY(slow);
      first_in_slowest += slow == first;
      broken += first_exit < last_entry;
      rank_times(of, samples, size, 0, ENTRY(first), sorted, entries, s);
      rank_times(of, samples, size, 1, ENTRY(first), sorted, exits, s);
#undef ENTRY
#undef EXIT
    }
    printf("%d ranks, %d samples%s: slowest %.2f us; entries", size, samples,
           reduce ? "" : " (no reduce)", median(slowest, samples));
    for (int k = 0; k < size; ++k) printf(" %.2f", median(entries + (size_t)k * samples, samples));
    printf("; exits");
    for (int k = 0; k < size; ++k) printf(" %.2f", median(exits + (size_t)k * samples, samples));
    printf("; first in is slowest in %.0f%%; left before the last entered: %d\n",
           100.0 * first_in_slowest / samples, broken);
  }
  MPI_Finalize();
  return 0;
}
